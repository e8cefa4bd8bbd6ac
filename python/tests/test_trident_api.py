"""The trident Python module: the same inputs as the flags, the JSON results as dicts."""
import json
import os
import subprocess

import pytest
import trident

ROOT = os.environ.get("TRIDENT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
GPT3 = os.path.join(EXAMPLES, "gpt3-175b-4096-a100.toml")


def test_plan_keywords_return_the_ranked_candidates():
    r = trident.plan(model="gpt3-175b", cluster="dgx-a100-80g", nodes=64, global_batch_size=512, top=2)
    assert len(r["candidates"]) == 2
    first, second = r["candidates"]
    assert first["tokens_per_s"] >= second["tokens_per_s"]
    lay = first["layout"]
    assert lay["tp"] * lay["pp"] * lay["dp"] == 512
    assert r["rationale"], "the decision-flow explanation comes along"


def test_dict_of_option_names_equals_keywords():
    a = trident.plan({"model": "gpt3-6.7b", "nodes": 2, "global-batch-size": 64}, top=1)
    b = trident.plan(model="gpt3-6.7b", nodes=2, global_batch_size=64, top=1)
    assert a["candidates"][0]["time_s"] == b["candidates"][0]["time_s"]


def test_lint_reads_a_config_and_flags_win():
    clean = trident.lint(config=GPT3)
    assert clean["fits"] is True
    assert not [f for f in clean["findings"] if f["severity"] == "error"]
    moved = trident.lint(config=GPT3, pp=16, dp=32)
    assert (moved["layout"]["pp"], moved["layout"]["dp"]) == (16, 32)


def test_lint_error_findings_are_a_result_not_an_exception():
    r = trident.lint(config=os.path.join(EXAMPLES, "lint-pitfalls.toml"))
    assert any(f["severity"] == "error" for f in r["findings"])


def test_switches_take_booleans():
    on = trident.lint(config=GPT3, sequence_parallel=True)
    off = trident.lint(config=GPT3, sequence_parallel=False)
    assert on["memory_gib"]["activations"] < off["memory_gib"]["activations"]


def test_topo_and_simulate_match_the_command_line(tmp_path):
    t = trident.topo(config=GPT3)
    assert t["world"] == 4096
    s = trident.simulate(config=GPT3)
    cli = os.environ.get("TRIDENT_CLI")
    if cli:
        out = subprocess.run([cli, "simulate", "--config", GPT3, "--json"], capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["step_s"] == s["step_s"]
    assert 0 < s["bubble_share"] < 1


def test_plan_json_equals_the_command_lines_rehearsal_check_included():
    # The module and the CLI run the same planning code, the runtime's capability check included.
    cli = os.environ.get("TRIDENT_CLI")
    assert cli, "TRIDENT_CLI names the trident executable (ctest sets it)"
    args = {"model": "gpt3-6.7b", "nodes": 2, "global-batch-size": 64, "top": 2}
    flags = [x for k, v in args.items() for x in ("--" + k, str(v))]
    out = subprocess.run([cli, "plan", *flags, "--json"], capture_output=True, text=True, check=True)
    r, c = trident.plan(args), json.loads(out.stdout)
    assert r["rehearsal"]["rehearsable"] in (True, False)
    for result in (r, c):
        del result["search"]["seconds"]  # the search's own time, measured in each process
    assert r == c


@pytest.mark.parametrize("command,config", [
    ("lint", "gpt3-175b-4096-a100.toml"),
    ("lint", "lint-pitfalls.toml"),
    ("lint", "llama3-405b-cp16-h100.toml"),
    ("lint", "mixtral-8x22b-8-dgx-h100.toml"),
    ("simulate", "gpt3-175b-4096-a100.toml"),
    ("simulate", "llama3-405b-cp16-h100.toml"),
    ("simulate", "mixtral-8x22b-8-dgx-h100.toml"),
])
def test_lint_and_simulate_json_equal_the_command_lines(command, config):
    # One writer (src/report/) behind both: the whole JSON, every finding and stage, is the same.
    cli = os.environ.get("TRIDENT_CLI")
    assert cli, "TRIDENT_CLI names the trident executable (ctest sets it)"
    path = os.path.join(EXAMPLES, config)
    extra = {"per_stage": True} if command == "lint" else {}
    flags = ["--per-stage"] if extra else []
    out = subprocess.run([cli, command, "--config", path, *flags, "--json"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr  # 1: lint found errors, still a result
    r = getattr(trident, command)(config=path, **extra)
    r.pop("stderr", None)
    assert r == json.loads(out.stdout)


def test_bad_input_raises_value_error_with_every_problem():
    with pytest.raises(ValueError) as e:
        trident.lint(model="gpt3-175b", nodes=1, global_batch_size=10, schedule="zigzag", zero=9)
    text = str(e.value)
    # Every problem at once, each with its fix.
    assert "zigzag" in text and "--zero 9" in text
    assert text.count("fix:") >= 2


def test_unknown_option_is_refused():
    with pytest.raises(ValueError):
        trident.plan(model="gpt3-175b", nodes=8, global_batch_size=64, no_such_option=3)


def test_a_nul_inside_a_string_argument_is_refused_not_cut_off():
    # "gpt3-175b\0junk" would reach the command as "gpt3-175b" and plan that model.
    for options in ({"model": "gpt3-175b\0junk"}, {"cluster": "dgx-a100-80g\0", "model": "gpt3-175b"}):
        with pytest.raises(ValueError) as e:
            trident.plan(nodes=8, global_batch_size=64, **options)
        assert "NUL" in str(e.value) and list(options)[0] in str(e.value)


def test_time_to_train_and_html(tmp_path):
    page = tmp_path / "plan.html"
    r = trident.plan(model="gpt3-1.3b", nodes=1, global_batch_size=64, top=1, train_tokens=1e9, html=str(page))
    assert r["time_to_train"]["steps"] == -(-1e9 // (64 * 2048))
    assert 'id="candidates"' in page.read_text()


def test_a_mistyped_keyword_names_the_closest_option():
    with pytest.raises(ValueError) as e:
        trident.plan(modle="llama3-70b", nodes=8, global_batch_size=64)
    assert "--modle" in str(e.value) and "did you mean '--model'?" in str(e.value)


def test_a_mistyped_preset_names_the_closest_preset():
    with pytest.raises(ValueError) as e:
        trident.plan(model="llama3-70", nodes=8, global_batch_size=64)
    assert "did you mean 'llama3-70b'?" in str(e.value)


def test_emit_and_help_return_their_text():
    args = trident.plan(model="gpt3-1.3b", nodes=1, global_batch_size=64, emit="megatron")
    assert isinstance(args, str) and "--tensor-model-parallel-size" in args
    # torchtitan's own stack: the default (Megatron-Core's ZeRO-2 and bf16 reduction) is refused there
    titan = trident.plan(model="gpt3-1.3b", nodes=1, global_batch_size=64, stack="torchtitan", emit="torchtitan")
    assert isinstance(titan, str) and "parallel" in titan
    text = trident.plan(help=True)
    assert isinstance(text, str) and "--global-batch-size" in text


@pytest.mark.parametrize("command,option", [("plan", "html"), ("simulate", "svg"), ("simulate", "html")])
def test_true_for_an_option_that_takes_a_file_is_refused_by_name(command, option, tmp_path, monkeypatch):
    # --html / --svg take a FILE: True would pass the bare flag, and the next argument became the
    # file's name (a page written to a file called '--json', then a JSON decode error).
    monkeypatch.chdir(tmp_path)
    options = dict(model="gpt3-1.3b", nodes=1, global_batch_size=64)
    if command == "simulate":
        options.update(tp=1, pp=1, dp=8)
    for value in (True, False):
        with pytest.raises(ValueError) as e:
            getattr(trident, command)(**options, **{option: value})
        text = str(e.value)
        assert f"--{option}" in text and "FILE" in text and f"{option}='" in text, text
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_an_option_given_twice_is_refused_naming_it():
    # The same option under both spellings, or in the dict and as a keyword: which one holds?
    for args, kwargs in [(({"global_batch_size": 64, "global-batch-size": 128},), {}),
                         (({"global-batch-size": 64},), {"global_batch_size": 128}),
                         (({"tp": 2},), {"tp": 4})]:
        with pytest.raises(ValueError) as e:
            trident.plan(*args, model="gpt3-1.3b", nodes=1, **kwargs)
        text = str(e.value)
        assert "given twice" in text and ("--global-batch-size" in text or "--tp" in text), text
        assert "At Most" not in text
