"""Function-calling tools generated from the analyzer registry (DESIGN.md §5)."""

from advisor_chat.tools.core import (
    SearchCasesParams,
    ShowTableParams,
    Tool,
    ToolOutput,
    ToolSession,
    base_schema,
    build_tools,
    fmt_ranks,
    inject_values,
    tool_schemas,
)
from advisor_chat.tools.render import cap_tokens, count_tokens
from advisor_chat.tools.store import TableStore

__all__ = [
    "SearchCasesParams",
    "ShowTableParams",
    "TableStore",
    "Tool",
    "ToolOutput",
    "ToolSession",
    "base_schema",
    "build_tools",
    "cap_tokens",
    "count_tokens",
    "fmt_ranks",
    "inject_values",
    "tool_schemas",
]
