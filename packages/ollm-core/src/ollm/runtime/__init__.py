"""The chat runtime: turns, parallel tool calls, limits, cancellation, events."""

from ollm.runtime.client import ChatClient, ChatResult, ChatStream, Prompt
from ollm.runtime.conversation import Conversation
from ollm.runtime.native import NativeStrategy
from ollm.runtime.settings import DEFAULT_CONTEXT_WINDOW, ChatSettings
from ollm.runtime.sync import SyncChatClient
from ollm.runtime.tokens import TokenBudget, count_request_tokens

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "ChatClient",
    "ChatResult",
    "ChatSettings",
    "ChatStream",
    "Conversation",
    "NativeStrategy",
    "Prompt",
    "SyncChatClient",
    "TokenBudget",
    "count_request_tokens",
]
