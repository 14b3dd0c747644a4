import random

import pytest

from compaction_app.engine.tokens import counter
from sessions_app.simulator.distributions import fixed
from sessions_app.simulator.scenarios import load_scenario
from sessions_app.simulator.tools import (
    NEW_CONTEXT_ACK,
    ApplyPatchTool,
    NewContextTool,
    ReadFileTool,
    SearchTool,
    ShellTool,
    ToolArgumentError,
    shell_flavor,
)

O200K = counter("o200k_base")
COMMANDS = {
    "pytest": "pytest -x tests/billing",
    "cargo": "cargo test --lib",
    "jest": "npm test",
    "log": "tail -n 20000 logs/billing-worker.log",
    "build": "make -j4",
    "listing": "find . -type f",
    "diff": "git diff HEAD~3",
}


def shell(size, *, failure_rate=0.5, unit="tokens", counter_name="o200k_base"):
    return ShellTool(cwd="/home/dev/app", output=fixed(size, unit), failure_rate=failure_rate,
                     counter_name=counter_name)


@pytest.mark.parametrize("flavor", sorted(COMMANDS))
def test_shell_output_of_a_fixed_token_size_is_within_two_percent(flavor):
    result = shell(5000).run({"command": ["bash", "-lc", COMMANDS[flavor]]}, rng=random.Random(7))
    assert shell_flavor(COMMANDS[flavor]) == flavor
    assert abs(O200K.count_text(result.output) - 5000) <= 100


@pytest.mark.parametrize("path", ["src/billing/split.py", "src/lib.rs", "web/cart.tsx", "README.md"])
def test_read_file_of_a_fixed_token_size_is_within_two_percent(path):
    result = ReadFileTool(seed=1, output=fixed(5000)).run({"path": path}, rng=random.Random(0))
    assert abs(O200K.count_text(result.output) - 5000) <= 100


def test_search_of_a_fixed_token_size_is_within_two_percent_and_every_hit_names_the_pattern():
    result = SearchTool(output=fixed(5000)).run({"pattern": r"def split_amount\("}, rng=random.Random(0))
    assert abs(O200K.count_text(result.output) - 5000) <= 100
    lines = result.output.splitlines()
    assert all("split_amount" in line and line.count(":") >= 2 for line in lines)


def test_byte_sizes_are_honoured_in_bytes():
    result = shell(20_000, unit="bytes").run({"command": "tail app.log"}, rng=random.Random(1))
    assert 19_000 <= len(result.output.encode()) <= 20_500


def test_codex_estimator_sizes_are_bytes_over_four():
    result = shell(3000, counter_name="codex_estimate").run({"command": "make"}, rng=random.Random(1))
    assert abs(len(result.output.encode()) / 4 - 3000) <= 60


def test_outputs_are_deterministic_per_seed_and_differ_across_seeds():
    tool = shell(2000)
    args = {"command": "pytest"}
    assert tool.run(args, rng=random.Random(5)).output == tool.run(args, rng=random.Random(5)).output
    assert tool.run(args, rng=random.Random(5)).output != tool.run(args, rng=random.Random(6)).output


def test_sizes_follow_the_scenario_distribution():
    tool = load_scenario("log-spelunking").build_tools(seed=1)["shell"]
    rng = random.Random(11)
    sizes = [O200K.count_text(tool.run({"command": "tail logs/a.log"}, rng=rng).output) for _ in range(30)]
    # The scenario mixes ~2k-token outputs with ~40k-token ones (capped at 120k).
    assert min(sizes) < 8_000
    assert max(sizes) > 20_000
    assert max(sizes) <= 121_000


def test_huge_outputs_are_generated_at_the_requested_size():
    result = shell(200_000, failure_rate=1.0).run({"command": "pytest -v"}, rng=random.Random(3))
    assert abs(O200K.count_text(result.output) - 200_000) <= 2_000
    log = shell(200_000).run({"command": "journalctl -u billing"}, rng=random.Random(3))
    assert abs(O200K.count_text(log.output) - 200_000) <= 2_000


def test_failing_test_runs_report_failures_and_a_nonzero_exit_code():
    failing = shell(1500, failure_rate=1.0).run({"command": "pytest"}, rng=random.Random(2)).output
    assert failing.startswith("Exit code: 1\n")
    assert "FAILURES" in failing and "AssertionError" in failing and " failed, " in failing
    passing = shell(1500, failure_rate=0.0).run({"command": "pytest"}, rng=random.Random(2)).output
    assert passing.startswith("Exit code: 0\n") and "FAILED" not in passing
    assert " passed" in passing.splitlines()[-1] and "failed" not in passing.splitlines()[-1]


def test_pytest_summary_counts_match_the_printed_results():
    out = shell(3000, failure_rate=1.0).run({"command": "pytest"}, rng=random.Random(4)).output
    lines = out.splitlines()
    passed = sum(line.endswith(" PASSED") for line in lines)
    failed = sum(line.endswith(" FAILED") for line in lines)
    assert f"{failed} failed, {passed} passed" in lines[-1]


def test_log_timestamps_increase():
    out = shell(3000).run({"command": "cat service.log"}, rng=random.Random(4)).output
    stamps = [line[:24] for line in out.splitlines()[3:] if line.startswith("2026-")]
    assert len(stamps) > 20 and stamps == sorted(stamps)


def test_read_file_returns_the_same_content_for_the_same_path():
    tool = ReadFileTool(seed="s1", output=fixed(800))
    first = tool.run({"path": "src/a.py"}, rng=random.Random(1)).output
    assert tool.run({"path": "src/a.py"}, rng=random.Random(2)).output == first
    assert tool.run({"path": "src/b.py"}, rng=random.Random(1)).output != first
    assert "def " in first


def test_missing_arguments_raise_tool_argument_errors():
    with pytest.raises(ToolArgumentError):
        shell(10).run({}, rng=random.Random(0))
    with pytest.raises(ToolArgumentError):
        ReadFileTool(seed=1, output=fixed(10)).run({"path": "  "}, rng=random.Random(0))


def test_apply_patch_reports_the_files_of_a_valid_patch():
    patch = (
        "*** Begin Patch\n*** Update File: src/billing/split.py\n@@\n-    return parts\n+    return fixed\n"
        "*** Add File: tests/test_new.py\n+def test_x():\n+    assert True\n*** Delete File: old.py\n*** End Patch"
    )
    out = ApplyPatchTool(failure_rate=0.0).run({"input": patch}, rng=random.Random(0)).output
    assert out == "Success. Updated the following files:\nM src/billing/split.py\nA tests/test_new.py\nD old.py\n"
    failed = ApplyPatchTool(failure_rate=1.0).run({"input": patch}, rng=random.Random(0)).output
    assert failed.startswith("apply_patch verification failed: Failed to find expected lines in src/billing/split.py")


def test_apply_patch_rejects_a_patch_without_its_envelope():
    out = ApplyPatchTool().run({"input": "--- a/x\n+++ b/x"}, rng=random.Random(0)).output
    assert out.startswith("apply_patch verification failed") and "*** Begin Patch" in out


def test_new_context_requests_a_new_window_with_a_short_acknowledgement():
    result = NewContextTool().run({}, rng=random.Random(0))
    assert result.new_window_requested
    assert result.output == NEW_CONTEXT_ACK and len(result.output) < 300
    assert not shell(50).run({"command": "ls"}, rng=random.Random(0)).new_window_requested


def test_tool_specs_use_the_responses_function_shape():
    specs = load_scenario("token-budget-long-task").tool_specs()
    assert [s["name"] for s in specs] == ["shell", "read_file", "search", "apply_patch", "new_context"]
    for spec in specs:
        assert spec["type"] == "function" and spec["description"]
        assert spec["parameters"]["type"] == "object"
        assert set(spec["parameters"]["required"]) <= set(spec["parameters"]["properties"])
