"""Every bad input in mxfp4.bad_inputs raises the stated exception with a message naming the
argument, and docs/bad_inputs.md is the table those rows generate."""
import pathlib

import pytest

from mxfp4.bad_inputs import BAD_INPUTS, markdown_table, outcome

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "bad_inputs.md"


@pytest.mark.parametrize("row", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=r.defect)) if r.defect
                                 else r for r in BAD_INPUTS], ids=[r.call for r in BAD_INPUTS])
def test_bad_input(row):
    kind, message = outcome(row)
    assert kind is row.raises, f"{row.call}: got {kind.__name__ if kind else 'no exception'}: {message}"
    assert row.names in message, f"{row.call}: message does not name {row.names!r}: {message}"


def test_doc_is_the_generated_table():
    assert DOC.read_text() == markdown_table(), \
        "regenerate: python -m mxfp4.bad_inputs > docs/bad_inputs.md"
