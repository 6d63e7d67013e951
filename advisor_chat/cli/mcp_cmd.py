"""``advisor-chat mcp [--root DIR ...] [--http --port N]``: the tools as an MCP server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from advisor_chat.cli.common import err_console, handle_errors

DEFAULT_PORT = 8765


def register(app: typer.Typer) -> None:
    """Add the ``mcp`` command to ``app``."""

    @app.command("mcp")
    @handle_errors
    def mcp(
        root: Annotated[
            list[Path] | None,
            typer.Option(
                "--root",
                metavar="DIR",
                help="Folder whose profiles the tools may read (repeatable; default: the current folder).",
            ),
        ] = None,
        http: Annotated[
            bool,
            typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio."),
        ] = False,
        port: Annotated[
            int, typer.Option("--port", help="Port of --http (URL http://127.0.0.1:PORT/mcp).")
        ] = DEFAULT_PORT,
        max_tokens: Annotated[
            int | None,
            typer.Option(
                "--max-tokens",
                min=200,
                help="Token cap of one tool result (default: the max_tool_tokens setting).",
            ),
        ] = None,
    ) -> None:
        """Serve the diagnosis and analyzer tools to an MCP client (Claude Code, Cursor, LangChain).

        Read-only; profile paths are accepted only under the --root folders.
        """
        from advisor_chat.errors import ConfigError
        from advisor_chat.mcp_server import ProfileTools, serve_http, serve_stdio

        try:
            import mcp  # noqa: F401
        except ModuleNotFoundError:
            raise ConfigError(
                "the MCP server needs the 'mcp' package (the 'mcp' extra): pip install -e '.[mcp]' "
                "in a checkout of advisor-chat, or pip install 'mcp>=2.3,<3' into this environment"
            ) from None
        tools = ProfileTools(root or [Path.cwd()], max_tokens=max_tokens)
        roots = ", ".join(str(r) for r in tools.roots)
        if http:
            err_console.print(
                f"MCP server at http://127.0.0.1:{port}/mcp (profiles under: {roots}); Ctrl+C stops it",
                highlight=False,
                soft_wrap=True,
            )
            serve_http(tools, port=port)
        else:
            err_console.print(
                f"MCP server on stdio (profiles under: {roots})", highlight=False, soft_wrap=True
            )
            serve_stdio(tools)
