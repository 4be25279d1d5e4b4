"""Settings (params.yaml, --config overrides, the Snakemake config): unknown names and typos named with
their nearest match, values that cannot be right (NaN, inf, booleans, out of range), keys given twice,
malformed sections. Each is refused before anything runs, in one line naming the key and the file, exit 2,
at every entry point. The short forms of params.yaml read as the long ones."""

from __future__ import annotations
import pytest
from runhelpers import PARAMS, assert_fails, assert_train_fails, ci_training, train_argv


# ----------------------------------------------------------------------------- unknown names, typos, values out of range


def test_unknown_method(inputs, capsys):
    assert_train_fails(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tiny", "method": "simcsee"}]}}},
                "suites.ci, run 'simcse'.method", "unknown method 'simcsee'", "did you mean 'simcse'")


def test_unknown_backbone(inputs, capsys):
    assert_train_fails(inputs, capsys, {"suites": {"ci": {"runs": [{"name": "simcse", "backbone": "tinny", "method": "simcse"}]}}},
                "run 'simcse'.backbone", "unknown backbone 'tinny'", "did you mean 'tiny'")


def test_unknown_pooler(inputs, capsys):
    assert_train_fails(inputs, capsys, {"backbones": {"tiny": {"pooler": "clss"}}},
                "backbones.tiny.pooler", "unknown pooler 'clss'", "did you mean 'cls'")


def test_unknown_objective(inputs, capsys):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"gausian_negatives": {}}}}},
                "objectives: unknown objective 'gausian_negatives'", "did you mean 'gaussian_negatives'")


def test_unknown_objective_setting(inputs, capsys):
    assert_train_fails(inputs, capsys, {"methods": {"simcse": {"objectives": {"gaussian_negatives": {"ratioo": 2}}}}},
                "objectives.gaussian_negatives", "unknown key 'ratioo'", "did you mean 'ratio'")


@pytest.mark.parametrize("lr", [0, -1e-5])
def test_learning_rate_must_be_positive(inputs, capsys, lr):
    assert_train_fails(inputs, capsys, ci_training(learning_rate=lr), "learning_rate must be > 0", str(float(lr)))


def test_batch_size_one(inputs, capsys):
    assert_train_fails(inputs, capsys, ci_training(batch_size=1), "batch_size must be >= 2", "in-batch negatives")


def test_typo_in_training_key(inputs, capsys):
    assert_train_fails(inputs, capsys, ci_training(learning_rte=1e-4), "over.yaml: suites.ci.training: unknown key 'learning_rte'",
                "did you mean 'learning_rate'")


def test_typo_in_top_level_key_names_the_override_file(inputs, capsys):
    line = assert_train_fails(inputs, capsys, {"trainin": {"learning_rate": 1e-4}}, "over.yaml", "unknown key 'trainin'",
                       "did you mean 'training'")
    assert "params.yaml" not in line


def test_typo_in_params_file_itself(inputs, capsys):
    bad = inputs / "params-typo.yaml"
    bad.write_text(PARAMS.read_text(encoding="utf-8").replace("  learning_rate: 3.0e-5", "  learning_rte: 3.0e-5", 1),
                   encoding="utf-8")
    out = inputs / "run"
    argv = train_argv(inputs, out, None)
    argv[argv.index("--params") + 1] = str(bad)
    assert_fails(capsys, argv, "params-typo.yaml: training: unknown key 'learning_rte'", "did you mean 'learning_rate'",
                 outputs=[out])


def test_invalid_yaml_override(inputs, capsys):
    cfg = inputs / "broken.yaml"
    cfg.write_text("training: {learning_rate: [1\n", encoding="utf-8")
    out = inputs / "run"
    assert_fails(capsys, train_argv(inputs, out, cfg), "broken.yaml", "not valid YAML", outputs=[out])
