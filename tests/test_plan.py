"""mxfp4.plan: every heuristic and table entry is a valid launch; the table loads."""
import json

import pytest

from mxfp4 import plan
from mxfp4.bench.shapes import shape_set


@pytest.mark.parametrize("name", ["bench", "test", "deepseek", "gptoss", "large"])
def test_heuristic_is_valid_everywhere(name):
    for s in shape_set(name):
        p = plan.heuristic(plan.Problem(s.m, s.n, s.k))
        p.check()
        assert p.fits(plan.Problem(s.m, s.n, s.k)) and p.smem_bytes() <= plan.SMEM_LIMIT


def test_table_loads_and_wins_for_its_shapes():
    table = plan.load_table()
    assert table, "the shipped table is empty"
    for (m, n, k), p in table.items():
        assert plan.choose(plan.Problem(m, n, k), table) == p


def test_bad_params_are_explained():
    with pytest.raises(ValueError, match="bn must be a positive multiple of 32"):
        plan.GemmParams(bn=48).check()
    with pytest.raises(ValueError, match="split must be in 1..8"):
        plan.GemmParams(split=9).check()


def test_missing_table_is_empty(tmp_path):
    assert plan.load_table(tmp_path / "none.json") == {}
    (tmp_path / "t.json").write_text(json.dumps({"entries": [{"m": 1, "n": 32, "k": 64, "params": {"bn": 48}}]}))
    with pytest.raises(ValueError):
        plan.load_table(tmp_path / "t.json")
