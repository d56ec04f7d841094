"""Terminals over the API (issue 43): REST opens, lists and closes an item's terminals, and each
has a WebSocket, served by the stack every app process runs and driven here by a real WebSocket
client. A stranger meets the same 404 as anywhere, another site's page is refused, and what the
client may not send ends the connection with a close code."""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.fixtures.terminals import close_code, read_until, terminal_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_opening_a_terminal_answers_its_id_and_websocket_and_lists_it(api_client_for, alice_item, opened):
    # Given alice opened a terminal in her notebook
    # When she lists the notebook's terminals
    listed = api_client_for("alice").get(terminal_url(alice_item, "/terminals")).json()
    # Then it is there, with its WebSocket on this server
    assert [row["id"] for row in listed] == [opened["id"]]
    assert opened["ws_url"].endswith(f"/terminals/{opened['id']}/ws")
    assert (opened["rows"], opened["cols"]) == (24, 80)


def test_a_shell_answers_over_the_websocket(socket_to, opened):
    # Given alice's terminal, connected
    connection = socket_to(opened)
    read_until(connection, lambda output, controls: any(c["type"] == "live" for c in controls))
    # When she types a command
    connection.send(b"echo $((6*7))''\n")
    output, _controls = read_until(connection, lambda output, controls: b"42\r\n" in output)
    # Then the shell answers on the terminal
    assert b"42\r\n" in output


def test_a_reconnect_replays_the_kept_output_once_then_goes_on_live(socket_to, opened):
    # Given alice's terminal printed "first", and her connection then dropped
    connection = socket_to(opened)
    connection.send(b"echo fi''rst\n")
    read_until(connection, lambda output, controls: b"first\r\n" in output)
    connection.close()
    # When she connects again and types another command
    again = socket_to(opened)
    replayed, controls = read_until(again, lambda output, controls: any(c["type"] == "live" for c in controls))
    again.send(b"echo sec''ond\n")
    live, _more = read_until(again, lambda output, controls: b"second\r\n" in output)
    # Then "first" is replayed once, before the marker of live output, and then the shell goes on
    assert controls[0]["type"] == "replay"
    assert controls[0]["start"] == 0
    assert replayed.count(b"first\r\n") == 1
    assert b"second\r\n" in live
    assert b"first\r\n" not in live


def test_resize_and_signal_control_messages_reach_the_shell(socket_to, opened):
    # Given alice's terminal running `sleep 100`
    connection = socket_to(opened)
    connection.send(b"sleep 100\n")
    read_until(connection, lambda output, controls: b"sleep 100" in output)
    time.sleep(0.3)  # the shell forks sleep after echoing the line
    # When she interrupts it, resizes the terminal, and asks its size
    connection.send(json.dumps({"type": "signal", "name": "INT"}))
    connection.send(json.dumps({"type": "resize", "rows": 30, "cols": 100}))
    connection.send(b"stty size\n")
    output, _controls = read_until(connection, lambda output, controls: b"30 100" in output)
    # Then sleep was interrupted and the terminal has its new size
    assert b"30 100" in output


def test_an_exited_terminal_says_its_code_and_a_reconnect_does_not_start_it_again(socket_to, opened):
    # Given alice's terminal whose shell exits with 4
    connection = socket_to(opened)
    connection.send(b"exit 4\n")
    _output, controls = read_until(connection, lambda output, controls: any(c["type"] == "exit" for c in controls))
    # When she connects again
    again = socket_to(opened)
    _replayed, again_controls = read_until(again, lambda output, controls: any(c["type"] == "exit" for c in controls))
    # Then both say it exited with 4
    assert {"type": "exit", "code": 4} in controls
    assert {"type": "exit", "code": 4} in again_controls


def test_a_strangers_websocket_is_the_404_of_a_terminal_that_does_not_exist(socket_to, opened):
    # Given alice's terminal
    # When dave connects to it, and alice to a terminal that does not exist
    with pytest.raises(InvalidStatus) as stranger:
        socket_to(opened, user="dave")
    with pytest.raises(InvalidStatus) as missing:
        socket_to({**opened, "ws_url": opened["ws_url"].replace(opened["id"], "0" * 32)})
    # Then both are refused the same way
    assert stranger.value.response.status_code == missing.value.response.status_code == 404
    assert json.loads(stranger.value.response.body)["error"] == json.loads(missing.value.response.body)["error"]


def test_a_websocket_opened_by_another_sites_page_is_refused(socket_to, opened):
    # Given alice's terminal
    # When a page of another site opens its WebSocket with her credentials (cross-site WebSocket hijacking)
    with pytest.raises(InvalidStatus) as refused:
        socket_to(opened, Origin="https://evil.example")
    # Then it is refused
    assert refused.value.response.status_code == 403
    assert json.loads(refused.value.response.body)["error"] == "cross_origin"


def test_the_websocket_address_over_plain_http_is_426(api_client_for, opened):
    # Given alice's terminal / When its WebSocket's address is fetched as a page would be
    path = opened["ws_url"].split("://", 1)[1].split("/", 1)[1]
    response = api_client_for("alice").get(f"/{path}")
    # Then she is told to connect with a WebSocket
    assert response.status_code == 426
    assert response.json()["error"] == "websocket_required"


@pytest.mark.parametrize(
    "message",
    [
        json.dumps({"type": "resize", "rows": 0, "cols": 80}),
        json.dumps({"type": "resize", "rows": 24, "cols": 10**6}),
        json.dumps({"type": "resize", "rows": "24", "cols": 80}),
        json.dumps({"type": "signal", "name": "KILL"}),
        json.dumps({"type": "launch"}),
        "not json",
        "[" * 1000,
    ],
    ids=[
        "no rows",
        "a million columns",
        "rows as text",
        "a signal not offered",
        "an unknown type",
        "no json",
        "nested too deep",
    ],
)
def test_a_control_message_out_of_bounds_closes_the_websocket_with_1008(socket_to, opened, message):
    # Given alice's terminal, connected
    connection = socket_to(opened)
    # When she sends a control message that is out of bounds
    connection.send(message)
    # Then the connection closes with a policy code, and the terminal lives on
    assert close_code(connection) == 1008
    again = socket_to(opened)
    again.send(b"echo st''ill\n")
    output, _controls = read_until(again, lambda output, controls: b"still\r\n" in output)
    assert b"still\r\n" in output


def test_a_frame_of_ten_megabytes_closes_the_websocket_with_1009(socket_to, opened):
    # Given alice's terminal, connected
    connection = socket_to(opened)
    # When ten megabytes come in one frame
    code = close_code(connection, sending=b"x" * (10 * 1024 * 1024))
    # Then the connection is closed as too big
    assert code == 1009


def test_closing_a_terminal_takes_it_off_the_list_and_its_websocket_away(api_client_for, alice_item, opened, socket_to):
    # Given alice's terminal
    alice = api_client_for("alice")
    # When she closes it
    deleted = alice.delete(terminal_url(alice_item, f"/terminals/{opened['id']}"))
    # Then it is gone from the list, and connecting to it is a 404
    assert deleted.status_code == 204
    assert alice.get(terminal_url(alice_item, "/terminals")).json() == []
    with pytest.raises(InvalidStatus) as gone:
        socket_to(opened)
    assert gone.value.response.status_code == 404


def test_a_stranger_can_neither_open_list_nor_close_terminals_of_alices_item(api_client_for, alice_item, opened):
    # Given alice's notebook with a terminal
    dave = api_client_for("dave")
    # When dave tries to open one there, list them, and close hers
    answers = [
        dave.post(terminal_url(alice_item, "/terminals"), {}, format="json"),
        dave.get(terminal_url(alice_item, "/terminals")),
        dave.delete(terminal_url(alice_item, f"/terminals/{opened['id']}")),
    ]
    # Then each is a 404, and hers is still open
    assert [answer.status_code for answer in answers] == [404, 404, 404]
    assert len(api_client_for("alice").get(terminal_url(alice_item, "/terminals")).json()) == 1


@pytest.mark.parametrize(
    "body",
    [{"rows": 0, "cols": 80}, {"rows": 24, "cols": 100000}, {"rows": "24", "cols": 80}, {"rows": True, "cols": 80}],
    ids=["no rows", "too many columns", "rows as text", "rows as a boolean"],
)
def test_a_terminal_of_an_impossible_size_is_400_and_opens_nothing(api_client_for, alice_item, body):
    # Given alice's notebook / When she asks for a terminal of an impossible size
    alice = api_client_for("alice")
    response = alice.post(terminal_url(alice_item, "/terminals"), body, format="json")
    # Then it is refused and nothing is open
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_terminal_size"
    assert alice.get(terminal_url(alice_item, "/terminals")).json() == []


def test_past_the_persons_open_terminals_a_new_one_is_429(settings, api_client_for, alice_item, opened):
    # Given alice may have one terminal open, and has one
    settings.WORKSPACE_TERMINALS_PER_USER = 1
    # When she opens another
    response = api_client_for("alice").post(terminal_url(alice_item, "/terminals"), {}, format="json")
    # Then she is told to close one first
    assert response.status_code == 429
    assert response.json()["error"] == "too_many_terminals"
    assert response["Retry-After"] == "5"


def test_closing_the_sandbox_closes_its_terminals(api_client_for, alice_item, opened):
    # Given alice's terminal / When she closes the notebook's sandbox
    alice = api_client_for("alice")
    assert alice.delete(terminal_url(alice_item, "/sandbox")).status_code in (200, 204)
    # Then the notebook has no terminal open
    assert alice.get(terminal_url(alice_item, "/terminals")).json() == []


def test_a_second_connection_takes_the_terminal_over_and_the_first_is_closed_with_4001(socket_to, opened):
    # Given alice's terminal, connected in one window
    first = socket_to(opened)
    read_until(first, lambda output, controls: any(c["type"] == "live" for c in controls))
    # When another window connects to it
    second = socket_to(opened)
    read_until(second, lambda output, controls: any(c["type"] == "live" for c in controls))
    # Then the first is closed as taken over (so it does not reconnect by itself), and the second types on
    assert close_code(first) == 4001
    second.send(b"echo seco''nd\n")
    output, _controls = read_until(second, lambda output, controls: b"second\r\n" in output)
    assert b"second\r\n" in output


def test_a_script_signs_in_to_the_websocket_with_its_token_in_a_header(api_client_for, live_server, opened):
    # Given alice's terminal and an API token of hers
    token = api_client_for("alice").post("/me/tokens", {"name": "shell script"}, format="json").json()["token"]
    path = opened["ws_url"].split("://", 1)[1].split("/", 1)[1]
    url = f"ws://{live_server.host}:{live_server.port}/{path}"
    # When a script connects with the token alone
    with connect(url, additional_headers={"Authorization": f"Token {token}"}, open_timeout=10) as connection:
        connection.send(b"echo by-''token\n")
        output, _controls = read_until(connection, lambda output, controls: b"by-token\r\n" in output)
    # Then it works in her terminal
    assert b"by-token\r\n" in output


def test_the_payer_of_someone_elses_item_may_not_open_a_terminal_there(api_client_for, alice_item):
    # Given alice's notebook, whose bill carol accepted (she tends it; she does not work in it)
    alice, carol = api_client_for("alice"), api_client_for("carol")
    assert alice.patch(terminal_url(alice_item), {"owner": "carol"}, format="json").status_code == 200
    assert carol.post(f"/me/resources/handovers/{alice_item['id']}/accept").status_code == 200
    # When carol opens a terminal there / Then she is told what she may do, as for an exec
    response = carol.post(terminal_url(alice_item, "/terminals"), {}, format="json")
    assert (response.status_code, response.json()["error"]) == (403, "payer_only")


def test_racing_openings_cannot_pass_the_persons_open_terminals(settings, api_client_for, alice_item, live_server):
    # Given alice may have one terminal open, and her notebook's sandbox is open
    settings.WORKSPACE_TERMINALS_PER_USER = 1
    api_client_for("alice").post(terminal_url(alice_item, "/exec"), {"command": "true"}, format="json")
    url = f"{live_server.url}{terminal_url(alice_item, '/terminals')}"

    def open_one(_number: int) -> int:
        response = httpx.post(url, json={"rows": 24, "cols": 80}, headers={"X-User-Id": "alice"}, timeout=30)
        return response.status_code

    # When eight requests open one at the same moment
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(open_one, range(8)))
    # Then one is opened and the others are told she has as many as she may
    assert sorted(codes) == [201] + [429] * 7
    assert len(api_client_for("alice").get(terminal_url(alice_item, "/terminals")).json()) == 1


def test_a_command_in_a_terminal_runs_past_the_exec_time_limit(write_config, socket_to, api_client_for, alice_item):
    # Given commands run through exec for one second at most
    write_config("[sandbox]\nexec_timeout = '1s'\n")
    opened = api_client_for("alice").post(terminal_url(alice_item, "/terminals"), {}, format="json").json()
    connection = socket_to(opened)
    # When a command in her terminal runs for longer
    connection.send(b"sleep 2; echo surv''ived\n")
    output, _controls = read_until(connection, lambda output, controls: b"survived\r\n" in output)
    # Then it runs to its end: a terminal's commands have no exec time limit
    assert b"survived\r\n" in output


def test_a_token_put_in_the_websockets_url_is_neither_used_nor_logged(caplog, socket_to, opened):
    # Given every log record kept
    caplog.set_level("DEBUG")
    secret = "tok-in-the-url-0123456789"
    # When a client puts a token in the WebSocket's address
    path_and_query = {**opened, "ws_url": f"{opened['ws_url']}?since=0&token={secret}"}
    connection = socket_to(path_and_query)
    read_until(connection, lambda output, controls: any(c["type"] == "live" for c in controls))
    connection.close()
    # Then nothing of the server's logged it (the test's own client logs what it sends)
    served = [record.getMessage() for record in caplog.records if not record.name.startswith("websockets.client")]
    assert served
    assert not [message for message in served if secret in message]


def test_an_offset_past_what_a_keeper_reads_is_400(api_client_for, alice_item, opened, live_server):
    # Given alice's terminal / When she asks its WebSocket for an offset of 19 digits
    path = terminal_url(alice_item, "/terminals/" + opened["id"] + "/ws")
    url = f"{live_server.url}{path}?since={10**18}"
    response = httpx.get(
        url,
        headers={
            "X-User-Id": "alice",
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    # Then it is refused as an offset out of bounds, not accepted and dropped
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_offset"
