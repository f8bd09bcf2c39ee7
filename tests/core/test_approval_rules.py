"""Approval rules and policies: deny > ask > allow > the tool's default > the policy's,
whatever the rules and their order (a property over random rule sets), and policy files
read with the mistakes named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ollm

ACTIONS = ("allow", "ask", "deny")
RANK = {action: rank for rank, action in enumerate(ACTIONS)}

tool_names = st.sampled_from(["fs_read", "fs_write", "shell_run", "git_status"])
globs = st.sampled_from(["*", "fs_*", "fs_write", "shell_*", "git_*", "*_run", "nothing"])
values = st.sampled_from(["/etc/passwd", "/home/ada", "ls", 3, True])
actions = st.sampled_from(ACTIONS)
rules = st.builds(
    ollm.ApprovalRule,
    actions,
    globs,
    st.dictionaries(st.sampled_from(["path", "cmd"]), st.sampled_from(["/etc/*", "*", "l?"])),
)
calls = st.builds(
    ollm.ToolCall,
    st.just("c1"),
    tool_names,
    st.dictionaries(st.sampled_from(["path", "cmd"]), values),
)
defaults = st.sampled_from([None, *ACTIONS])


def reference(
    rules: list[ollm.ApprovalRule], call: ollm.ToolCall, tool: str | None, default: str
) -> str:
    """The precedence, written out plainly."""
    matching = [r.action for r in rules if r.matches(call)]
    if matching:
        return max(matching, key=RANK.__getitem__)
    return tool if tool is not None else default


def tool_for(call: ollm.ToolCall, approval: str | None) -> ollm.Tool:
    return ollm.Tool.from_schema(ollm.ToolSchema(call.name), lambda **_: "", approval=approval)


@given(st.lists(rules, max_size=8), calls, defaults, actions, st.randoms())
def test_the_strictest_matching_rule_decides_whatever_their_order(
    rule_set: list[ollm.ApprovalRule],
    call: ollm.ToolCall,
    tool_default: str | None,
    default: Any,
    random: Any,
) -> None:
    policy = ollm.ApprovalPolicy(tuple(rule_set), default)
    tool = tool_for(call, tool_default)
    decision = policy.decide(call, tool)
    assert decision.action == reference(rule_set, call, tool_default, default)
    shuffled = list(rule_set)
    random.shuffle(shuffled)
    assert ollm.ApprovalPolicy(tuple(shuffled), default).decide(call, tool).action == (
        decision.action
    )
    # A rule that matches never makes the decision less strict; a deny always wins.
    for action in ACTIONS:
        more = policy.with_rules([ollm.ApprovalRule(action, call.name)]).decide(call, tool)
        assert RANK[more.action] >= RANK[decision.action] or not any(
            r.matches(call) for r in rule_set
        )
    assert policy.with_rules([ollm.ApprovalRule("deny", "*")]).decide(call, tool).action == "deny"
    # Who decided: a rule when one matches, else the tool, else the default.
    if any(r.matches(call) for r in rule_set):
        assert decision.by == "rule"
    else:
        assert decision.by == ("tool" if tool_default is not None else "default")


def test_an_argument_matches_its_glob_as_text() -> None:
    rule = ollm.ApprovalRule("deny", "fs_*", args={"path": "/etc/*"})
    assert rule.matches(ollm.ToolCall("1", "fs_write", {"path": "/etc/hosts"}))
    assert not rule.matches(ollm.ToolCall("1", "fs_write", {"path": "/home/a"}))
    assert not rule.matches(ollm.ToolCall("1", "fs_write", {}))
    assert ollm.ApprovalRule("ask", args={"n": "[0-9]"}).matches(ollm.ToolCall("1", "x", {"n": 7}))


def test_a_predicate_that_fails_is_a_match_for_the_strict_and_none_for_allow() -> None:
    def broken(args: dict[str, Any]) -> bool:
        raise KeyError("path")

    call = ollm.ToolCall("1", "fs_write", {})
    assert ollm.ApprovalRule("deny", when=broken).matches(call)
    assert ollm.ApprovalRule("ask", when=broken).matches(call)
    assert not ollm.ApprovalRule("allow", when=broken).matches(call)


POLICY = """
default = "ask"

[[rules]]
action = "deny"
tool = "shell_*"
reason = "no shell commands"

[[rules]]
action = "allow"
tool = "fs_read"
args = { path = "/home/*" }
"""


def test_a_policy_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    policy = ollm.ApprovalPolicy.from_file(path)
    assert policy.default == "ask"
    assert policy.decide(ollm.ToolCall("1", "shell_run", {})) == ollm.ApprovalDecision(
        "deny", "rule", "no shell commands"
    )
    assert policy.decide(ollm.ToolCall("1", "fs_read", {"path": "/home/a"})).action == "allow"
    assert policy.decide(ollm.ToolCall("1", "fs_read", {"path": "/etc"})).action == "ask"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("default = 'maybe'", 'default must be "allow", "ask" or "deny", not \'maybe\''),
        ("[[rules]]\ntool = 'x'", 'rule 1: action must be "allow", "ask" or "deny", not None'),
        ("[[rules]]\naction = 'deny'\ntools = 'x'", "rule 1 has 'tools'; a rule takes action"),
        ("[[rules]]\naction = 'deny'\nargs = { path = 3 }", "rule 1: args must be a table"),
        ("rule = []", "has 'rule', which a policy does not take"),
        ("default = ", "is not valid TOML"),
    ],
)
def test_a_mistake_in_a_policy_file_is_named(text: str, said: str) -> None:
    with pytest.raises(ollm.InvalidRequestError) as caught:
        ollm.ApprovalPolicy.from_toml(text, "policy.toml")
    assert caught.value.message.startswith("policy.toml")
    assert said in caught.value.message


def test_where_the_policy_file_is() -> None:
    assert ollm.policy_path({"OLLM_POLICY": "/x/p.toml"}) == Path("/x/p.toml")
    assert ollm.policy_path({"XDG_CONFIG_HOME": "/cfg", "HOME": "/h"}) == Path(
        "/cfg/ollm/policy.toml"
    )
    assert ollm.policy_path({"HOME": "/h"}) == Path("/h/.config/ollm/policy.toml")


def test_a_path_glob_sees_the_normalised_path_and_an_allow_needs_both() -> None:
    deny = ollm.ApprovalRule("deny", "fs_*", args={"path": "/etc/*"})
    allow = ollm.ApprovalRule("allow", "fs_*", args={"path": "/home/*"})
    for sneaky in ("/srv/../etc/passwd", "//etc/passwd", "/home/../etc/x", "/./etc/x"):
        call = ollm.ToolCall("1", "fs_write", {"path": sneaky})
        assert deny.matches(call), sneaky
        policy = ollm.ApprovalPolicy((allow,), default="ask")
        assert policy.decide(call).action == "ask", sneaky
    plain = ollm.ToolCall("1", "fs_write", {"path": "/home/ada/notes"})
    assert allow.matches(plain)
    assert not deny.matches(plain)
    # A glob without a slash is about text, not paths: left as it is.
    text = ollm.ApprovalRule("deny", "sh", args={"cmd": "rm *"})
    assert text.matches(ollm.ToolCall("1", "sh", {"cmd": "rm a/../b"}))


# Pieces that leave a path where it was, however many there are.
neutral = st.lists(st.sampled_from(["srv/../", "./", "/", "a/b/../../"]), max_size=5)
names = st.sampled_from(["passwd", "hosts", "ssh/sshd_config"])


@given(neutral, neutral, names)
def test_a_deny_on_a_folder_holds_however_its_paths_are_written(
    front: list[str], middle: list[str], name: str
) -> None:
    """Property: a path that comes to one under /etc is denied by a deny on /etc/*,
    and an allow on /home/* never lets one out of /home through."""
    deny = ollm.ApprovalRule("deny", "fs_*", args={"path": "/etc/*"})
    allow = ollm.ApprovalRule("allow", "fs_*", args={"path": "/home/*"})
    into_etc = "/" + "".join(front) + "etc/" + "".join(middle) + name
    assert deny.matches(ollm.ToolCall("1", "fs_write", {"path": into_etc}))
    out_of_home = "/home/" + "".join(front) + "../etc/" + name
    assert not allow.matches(ollm.ToolCall("1", "fs_read", {"path": out_of_home}))
    assert deny.matches(ollm.ToolCall("1", "fs_read", {"path": out_of_home}))
