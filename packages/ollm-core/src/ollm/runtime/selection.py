"""Which tool-calling strategy a chat uses: native, ReAct, or another installed one.

``auto`` picks native tool calling unless the model is known to lack it (its reported
capabilities, or an earlier "does not support tools" answer remembered per provider and
model), and then ReAct when it is installed, or the strategy the model's capabilities
name (``tool_strategy``, such as ``json-react``, else their ``fallback_tool_strategy``,
such as ``react-example``) when that one is. Each switch is announced with a notice.

Native tool calling is ``recover`` when a plugin registers it (``ollm-react`` does) and
the chat allows it (``recover_text_tool_calls``): the tools go to the provider as they
are, and a call the model wrote as text instead is run as the call it is.

Internal: not part of ollm's public API (a step of ``ollm.ChatClient.chat``); its layout
may change in any release.
"""

from __future__ import annotations

from ollm.errors import ErrorCode, ToolsUnsupportedError
from ollm.registries.strategies import StrategyRegistry
from ollm.runtime.native import NativeStrategy
from ollm.types.events import ErrorEvent, NoticeEvent
from ollm.types.models import ModelCapabilities
from ollm.types.strategy import ToolStrategy

__all__ = ["NATIVE", "RECOVER", "StrategySelection"]

RECOVER = "recover"
"""The registry name of native tool calling that also reads calls written as text."""
NATIVE = frozenset({"native", RECOVER})


class StrategySelection:
    """The strategy decisions of one chat, with the client's memory of refusals."""

    def __init__(
        self,
        strategies: StrategyRegistry,
        refused: set[tuple[str, str]],
        provider: str,
        model: str,
        mode: str,
        *,
        recover: bool,
    ) -> None:
        self.strategies = strategies
        self.refused = refused
        self.key = (provider, model)
        self.model = model
        self.mode = mode
        self.recover = recover
        # What the model was known to do when the chat began (None: not asked, or the
        # provider cannot say): a refusal later switches to the strategy they name.
        self.capabilities: ModelCapabilities | None = None

    @property
    def remembered(self) -> bool:
        """This model has refused native tools before (so capabilities need not be asked)."""
        return self.key in self.refused

    def initial(
        self, capabilities: ModelCapabilities | None
    ) -> tuple[ToolStrategy, NoticeEvent | None]:
        """The strategy for a chat that offers tools, and the notice that says why."""
        self.capabilities = capabilities
        if self.mode == "native":
            return self._native(), None
        if self.mode != "auto":
            return self.strategies.create(self.mode), None
        if self.remembered or (capabilities is not None and capabilities.tools is False):
            wanted = self._named(capabilities)
            if wanted is not None:
                why = f"{self.model} cannot call tools natively: using the {wanted} strategy."
                return self.strategies.create(wanted), NoticeEvent(why, "strategy")
            if "react" not in self.strategies:
                raise ToolsUnsupportedError(install_react(self.model))
            return self._react(f"{self.model} cannot call tools natively: using ReAct.")
        return self._native(), None

    def _named(self, capabilities: ModelCapabilities | None) -> str | None:
        """The installed strategy the model's capabilities name (first choice first)."""
        if capabilities is None:
            return None
        for wanted in (capabilities.tool_strategy, capabilities.fallback_tool_strategy):
            if wanted and wanted in self.strategies and wanted not in NATIVE:
                return wanted
        return None

    def _native(self) -> ToolStrategy:
        if self.recover and RECOVER in self.strategies:
            return self.strategies.create(RECOVER)
        return NativeStrategy()

    def after_refusal(
        self, strategy: ToolStrategy, error: ErrorEvent | None, streamed: bool
    ) -> tuple[ToolStrategy, NoticeEvent] | None:
        """After a 'does not support tools' answer: for this model from now on, the
        strategy its capabilities name when one is installed, else ReAct."""
        if (
            error is None
            or error.code != ErrorCode.TOOLS_UNSUPPORTED
            or self.mode != "auto"
            or strategy.name not in NATIVE
            or streamed
        ):
            return None
        wanted = self._named(self.capabilities)
        if wanted is None and "react" not in self.strategies:
            return None
        self.refused.add(self.key)
        if wanted is not None:
            why = f"{self.model} does not support native tool calling: switched to {wanted}."
            return self.strategies.create(wanted), NoticeEvent(why, "strategy")
        react, notice = self._react(
            f"{self.model} does not support native tool calling: switched to ReAct."
        )
        assert notice is not None
        return react, notice

    def explain(self, strategy: ToolStrategy, error: ErrorEvent) -> ErrorEvent:
        """Add the next step to an error the runtime knows more about than the provider."""
        if (
            error.code == ErrorCode.TOOLS_UNSUPPORTED
            and strategy.name in NATIVE
            and "react" not in self.strategies
        ):
            return ErrorEvent(f"{error.message}. {install_react(self.model)}", error.code)
        return error

    def _react(self, why: str) -> tuple[ToolStrategy, NoticeEvent | None]:
        return self.strategies.create("react"), NoticeEvent(why, "strategy")


def install_react(model: str) -> str:
    """What to do when a model cannot call tools and ReAct is not installed."""
    return (
        f"{model} cannot call tools natively. To use tools with it, install ReAct support "
        "(pip install ollm-react), or chat without tools."
    )
