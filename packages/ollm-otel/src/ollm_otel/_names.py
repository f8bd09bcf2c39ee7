"""The names ollm-otel writes, from the OpenTelemetry GenAI semantic conventions.

Pinned to one version of the conventions (``SEMCONV_VERSION``); the tests check every
name here against the registry of that version. The GenAI conventions are still in
development: a later version may rename things, and this file moves with it on purpose.

Internal: the public names are re-exported by ``ollm_otel``.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SCHEMA_URL", "SEMCONV_VERSION"]

SEMCONV_VERSION: Final = "1.44.0"
"""The version of the semantic conventions ollm-otel follows."""

SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
"""The schema URL its tracer and meter say they follow."""

# -- operations (gen_ai.operation.name) and the span names built from them -------------
INVOKE_AGENT: Final = "invoke_agent"
CHAT: Final = "chat"
EXECUTE_TOOL: Final = "execute_tool"

# -- attributes ---------------------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_TOP_P: Final = "gen_ai.request.top_p"
REQUEST_TOP_K: Final = "gen_ai.request.top_k"
REQUEST_SEED: Final = "gen_ai.request.seed"
REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
REQUEST_STREAM: Final = "gen_ai.request.stream"
OUTPUT_TYPE: Final = "gen_ai.output.type"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
TOKEN_TYPE: Final = "gen_ai.token.type"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
MCP_METHOD_NAME: Final = "mcp.method.name"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

# -- metrics, with the buckets the conventions advise ---------------------------------
OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
TOKEN_USAGE: Final = "gen_ai.client.token.usage"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"

DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
    67108864,
)  # fmt: skip
FIRST_CHUNK_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

# ollm's providers by the names the conventions give them (others keep ollm's name).
PROVIDERS: Final = {"gemini": "gcp.gemini"}
