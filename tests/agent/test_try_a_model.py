"""Trying the model agent (README "Try a model on this machine"): the model assistant app, there only
where a model is connected, and the scripted test model server run alone with `python -m`."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.items import item_url
from tests.fixtures.llm import demo_reply
from workspace.agent.turns import answering_agent
from workspace.items import demo
from workspace.items.config import get_config
from workspace.items.models import Item

pytestmark = pytest.mark.django_db

REPOSITORY = Path(__file__).resolve().parents[2]
MIB = 1024**2


def test_without_a_model_the_model_assistant_is_not_listed_and_its_pages_are_a_404(alice_api, settings):
    # Given no model connected
    settings.WORKSPACE_LLM_BASE_URL = ""
    # When alice lists the apps and opens the model assistant's items
    listed = [app["slug"] for app in alice_api.get("/a").json()]
    items = alice_api.get("/a/assistant/items")
    # Then it is not there: not listed, its items a 404
    assert "assistant" not in listed
    assert {"notebook", "rca"} <= set(listed)
    assert items.status_code == 404


def test_with_a_model_connected_the_model_assistant_is_listed_answered_by_the_model_and_sized_by_the_default(
    alice_api, llm_provider
):
    # Given a model connected (the test server)
    # When alice lists the apps
    listed = {app["slug"]: app for app in alice_api.get("/a").json()}
    # Then the model assistant is there, its chats answered by the model agent, its sandboxes given
    # the config's default size like every app that declares none
    assert listed["assistant"]["name"] == "Model assistant"
    app = get_config().app("assistant")
    assert answering_agent(app).kind == "model"
    assert (app.resources.sandbox.cpu_cores, app.resources.sandbox.memory_bytes) == (1.0, 512 * MIB)


def test_the_model_assistant_runs_a_command_in_its_sandbox_through_the_models_tool_call(
    alice_api, llm_provider, settings
):
    # Given a model connected that follows the standalone server's script (a command named in
    # backticks is a run_command call), and a model assistant item of alice's
    settings.WORKSPACE_LLM_TIMEOUT = 10.0
    llm_provider.reply = demo_reply
    created = alice_api.post("/a/assistant/items", {"title": "Try it"}, format="json")
    assert created.status_code == 201, created.content
    item = Item.objects.get(pk=created.json()["id"])
    # When alice asks it to run a command
    sent = alice_api.post(item_url(item, "/messages"), {"content": "Run `echo hello from the sandbox`"}, format="json")
    # Then the command ran in the item's sandbox through a tool call, and the reply quotes its output
    reply = sent.json()["replies"][0]
    assert [(step["tool"], step["ok"], step["output"]) for step in reply["steps"]] == [
        ("run_command", True, "exit code 0\nhello from the sandbox\n")
    ]
    assert "hello from the sandbox" in reply["content"]
    # And the call went back to the model as an assistant message whose content is text, even
    # empty (llama-cpp-python's server refuses a null one)
    assert llm_provider.chat_requests[1].messages[-2]["content"] == ""


def test_the_demo_gives_alice_a_model_assistant_item_only_where_a_model_is_connected(settings, llm_server):
    # Given the demo's items loaded without a model
    settings.WORKSPACE_LLM_BASE_URL = ""
    demo.load(say=lambda line: None)
    assert not Item.objects.filter(app_slug="assistant").exists()
    # When they are loaded again with a model connected
    settings.WORKSPACE_LLM_BASE_URL, settings.WORKSPACE_LLM_MODEL = llm_server.base_url, "test-model"
    said: list[str] = []
    demo.load(say=said.append)
    # Then alice has one item to try the model agent in, and nothing else was added
    assert list(Item.objects.filter(app_slug="assistant").values_list("title", "created_by")) == [
        ("Try the model agent", "alice")
    ]
    assert len(said) == 1


@pytest.fixture
def standalone_server() -> Iterator[str]:
    """`python -m tests.fixtures.llm` on a free port; yields its base URL, stops it after the test."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.llm", "--port", "0"],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline()
        assert "http://127.0.0.1:" in first_line, (first_line, process.stderr.read() if process.poll() else "")
        yield first_line.split(" is at ", 1)[1].split(";", 1)[0]
    finally:
        process.terminate()
        process.wait(timeout=10)
        process.stdout.close()
        process.stderr.close()


def _chat(base_url: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_the_test_model_server_runs_alone_and_answers_a_chat_completion_and_a_tool_call(standalone_server):
    # Given the scripted test server started alone, on a free port
    # When it is asked a question, then asked with tools to run a named command
    answer = _chat(standalone_server, {"model": "m", "messages": [{"role": "user", "content": "What is a quota?"}]})
    tools = [{"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}]
    call = _chat(
        standalone_server,
        {"model": "m", "messages": [{"role": "user", "content": "Run `uname -a`"}], "tools": tools},
    )
    # Then it answers as an OpenAI-compatible server: a completion citing [1], then a run_command call
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == "The documents answer this [1]."
    assert call["choices"][0]["finish_reason"] == "tool_calls"
    function = call["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (function["name"], json.loads(function["arguments"])) == ("run_command", {"command": "uname -a"})
