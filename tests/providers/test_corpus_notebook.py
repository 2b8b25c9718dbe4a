"""A Jupyter notebook is indexed as its cells' text, cited by the lines of its JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hostd.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_WINDOW_LINES, piece_counter
from hostd.protocol import FrameIdentity, address_line_range, sha256_digest
from providers import Corpus, CorpusOptions, chunk_frame, verify_chunk
from providers._corpus import (
    NOTEBOOK_READ_FACTOR,
    SKIP_NOTEBOOK,
    SKIP_TOO_LARGE,
    not_indexed,
)
from providers._corpus_cache import load_corpus, save_corpus
from tests.fixtures.cli import run_hostd

MARKDOWN = "# Churn analysis\n\nWe model customer churn with a gradient boosted classifier.\n"
CODE = "import pandas as pd\ndf = pd.read_csv(\"churn.csv\")\nprint(f'loaded {len(df)} rows')"
#: A PNG's base64, as an image output holds it (long enough to be a chunk of its own).
IMAGE = "iVBORw0KGgoAAAANSUhEUgAA" + "QUFB" * 2000


def _lines(text: str) -> list[str]:
    """A cell's source as Jupyter writes it: one string a line, each but the last with
    its newline."""
    return text.splitlines(keepends=True)


def _notebook(cells: list[dict[str, Any]], metadata: dict[str, Any] | None = None) -> str:
    """nbformat 4 JSON as Jupyter writes it (``nbformat.write``: sorted keys, indent 1)."""
    if metadata is None:
        metadata = {"kernelspec": {"display_name": "Python 3", "language": "python"}}
    nb = {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _markdown(text: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": "m", "metadata": {}, "source": _lines(text)}


def _code(text: str, outputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c",
        "metadata": {},
        "outputs": outputs or [],
        "source": _lines(text),
    }


def _analysis() -> str:
    """A markdown cell, then a code cell whose outputs are a stream and an image."""
    outputs: list[dict[str, Any]] = [
        {"name": "stdout", "output_type": "stream", "text": ["loaded 1200 rows\n"]},
        {
            "data": {"image/png": IMAGE, "text/plain": ["<Figure size 640x480>"]},
            "metadata": {},
            "output_type": "display_data",
        },
    ]
    return _notebook([_markdown(MARKDOWN), _code(CODE, outputs)])


def _corpus(root: Path) -> Corpus:
    corpus = Corpus(CorpusOptions(root=root))
    corpus.refresh()
    return corpus


def _identity(corpus: Corpus, n: int) -> FrameIdentity:
    frame = chunk_frame(corpus.chunks[n], 0.5)
    return FrameIdentity(
        provider_id="files", frame_id=frame.id, content_digest=frame.content_digest
    )


def test_a_notebook_is_indexed_as_its_cells_text_without_its_outputs(tmp_path: Path) -> None:
    (tmp_path / "analysis.ipynb").write_text(_analysis())
    corpus = _corpus(tmp_path)
    assert [(c.text, c.kind, c.citation_label) for c in corpus.chunks] == [
        (MARKDOWN, "doc", "analysis.ipynb cell 1"),
        (CODE, "snippet", "analysis.ipynb cell 2 (python)"),
    ]
    assert corpus.chunks[0].title == "analysis.ipynb § Churn analysis"  # as a .md's
    assert corpus.skipped == {}  # the image is not there to be refused as a long line


def test_a_notebook_frame_cites_lines_of_the_file_a_reread_checks(tmp_path: Path) -> None:
    text = _analysis()
    (tmp_path / "analysis.ipynb").write_text(text)
    corpus = _corpus(tmp_path)
    for chunk in corpus.chunks:
        frame = chunk_frame(chunk, 0.5)
        (prov,) = frame.provenance
        addressed = address_line_range(text.encode(), prov.range)
        # The host re-reads these lines (F5): the JSON strings of exactly this cell.
        assert prov.digest == sha256_digest(addressed)
        assert json.loads("[" + addressed.decode().rstrip().rstrip(",") + "]") == _lines(
            frame.content or ""
        )
        assert frame.content_digest == sha256_digest(chunk.text.encode())  # D4


def test_verify_judges_a_notebook_chunk_by_its_cell_text(tmp_path: Path) -> None:
    path = tmp_path / "analysis.ipynb"
    path.write_text(_analysis())
    code = _identity(_corpus(tmp_path), 1)
    assert verify_chunk(tmp_path, code).status == "valid"
    # Run again, the notebook's outputs change; its code does not.
    path.write_text(_analysis().replace("loaded 1200 rows", "loaded 1300 rows"))
    assert verify_chunk(tmp_path, code).status == "valid"
    path.write_text(_analysis().replace("churn.csv", "churn-2024.csv"))
    verdict = verify_chunk(tmp_path, code)
    assert verdict.status == "stale"
    assert verdict.replacement_digest == sha256_digest(
        CODE.replace("churn.csv", "churn-2024.csv").encode()
    )
    path.write_text("not a notebook now\n")
    assert verify_chunk(tmp_path, code).status == "gone"


@pytest.mark.parametrize(
    ("metadata", "language"),
    [
        ({"kernelspec": {"language": "R", "name": "ir"}}, "r"),
        ({"language_info": {"name": "julia"}}, "julia"),
        ({}, "python"),
        ({"kernelspec": {"language": "not a\nname"}}, "python"),
    ],
)
def test_a_code_cell_is_labelled_with_the_notebooks_language(
    tmp_path: Path, metadata: dict[str, Any], language: str
) -> None:
    (tmp_path / "fit.ipynb").write_text(_notebook([_code("model <- fit(churn)\n")], metadata))
    (chunk,) = _corpus(tmp_path).chunks
    assert chunk.citation_label == f"fit.ipynb cell 1 ({language})"


def test_a_long_cell_is_cut_into_chunks_that_name_its_lines(tmp_path: Path) -> None:
    long = "".join(f"step_{i} = transform(step_{i - 1})\n" for i in range(1, 101))
    (tmp_path / "pipeline.ipynb").write_text(_notebook([_markdown(MARKDOWN), _code(long)]))
    corpus = _corpus(tmp_path)
    cut = [c for c in corpus.chunks if c.kind == "snippet"]
    assert len(cut) > 1
    assert len({c.chunk_id for c in corpus.chunks}) == len(corpus.chunks)
    assert "".join(c.text for c in cut) == long
    first = cut[0].text.count("\n")
    assert cut[0].citation_label == f"pipeline.ipynb cell 2 (python) lines 1-{first}"
    for n in range(len(corpus.chunks)):
        assert verify_chunk(tmp_path, _identity(corpus, n)).status == "valid"


@pytest.mark.parametrize(
    ("metadata", "expect_items"),
    [({"kernelspec": {"language": "python"}}, True), ({"kernelspec": {"language": "R"}}, False)],
    ids=["python", "r"],
)
def test_the_parts_of_a_long_code_cell_name_the_definitions_they_start_in(
    tmp_path: Path, metadata: dict[str, Any], expect_items: bool
) -> None:
    methods = "".join(
        f"    def step_{i}(self, frame):\n        frame = frame.fillna({i})\n"
        f"        return frame.dropna()\n\n"
        for i in range(60)
    )
    cell = f"import pandas as pd\n\nclass Cleaner:\n{methods}"
    notebook = _notebook([_markdown(MARKDOWN), _code(cell)], metadata)
    (tmp_path / "clean.ipynb").write_text(notebook)
    cut = [c for c in _corpus(tmp_path).chunks if c.kind == "snippet"]
    assert len(cut) > 1
    assert cut[0].item is None  # the cell's top is at top level
    if expect_items:  # read as a ``.py`` file of the cell's text would be
        assert {c.item for c in cut[1:]} <= {"class Cleaner"} | {
            f"class Cleaner › def step_{i}" for i in range(60)
        }
        assert all(c.item for c in cut[1:])
        for c in cut:
            assert c.title == (f"{c.index_title} · in {c.item}" if c.item else c.index_title)
    else:  # R: a language no item scan knows
        assert {c.item for c in cut} == {None}


def test_a_cell_written_as_one_string_is_one_chunk(tmp_path: Path) -> None:
    long = "".join(f"step_{i} = transform(step_{i - 1})\n" for i in range(1, 101))
    cell = {**_code(""), "source": long}  # one string: its lines cannot be cited apart
    (tmp_path / "pipeline.ipynb").write_text(_notebook([cell]))
    corpus = _corpus(tmp_path)
    (chunk,) = corpus.chunks
    assert chunk.text == long and chunk.citation_label == "pipeline.ipynb cell 1 (python)"
    assert verify_chunk(tmp_path, _identity(corpus, 0)).status == "valid"


IMPORTS = "import pandas as pd"
LOAD = 'df = pd.read_csv("churn.csv")'
PEEK = "df.head()"
#: What a code cell's run printed: re-run, it changes; its code does not.
RUN = [{"name": "stdout", "output_type": "stream", "text": ["loaded 1200 rows\n"]}]


def _small_cells() -> str:
    """A markdown cell, three one-line code cells (the middle one with an output), then
    two short markdown cells."""
    return _notebook(
        [
            _markdown(MARKDOWN),
            _code(IMPORTS),
            _code(LOAD, RUN),
            _code(PEEK),
            _markdown("## Next steps\n"),
            _markdown("Try a survival model."),
        ]
    )


def test_adjacent_small_cells_of_one_kind_are_one_chunk_naming_them(tmp_path: Path) -> None:
    text = _small_cells()
    (tmp_path / "analysis.ipynb").write_text(text)
    corpus = _corpus(tmp_path)
    assert [(c.citation_label, c.kind, c.text) for c in corpus.chunks] == [
        ("analysis.ipynb cell 1", "doc", MARKDOWN),  # no markdown cell next to it
        ("analysis.ipynb cells 2-4 (python)", "snippet", f"{IMPORTS}\n\n{LOAD}\n\n{PEEK}"),
        ("analysis.ipynb cells 5-6", "doc", "## Next steps\n\nTry a survival model."),
    ]
    for n, chunk in enumerate(corpus.chunks):
        frame = chunk_frame(chunk, 0.5)
        (prov,) = frame.provenance
        addressed = address_line_range(text.encode(), prov.range)
        # From its first cell's source strings to its last's, which the host re-reads (F5).
        assert prov.digest == sha256_digest(addressed)
        held = addressed.decode().splitlines()
        assert chunk.text.startswith(json.loads(held[0].strip().rstrip(",")))
        assert chunk.text.endswith(json.loads(held[-1].strip().rstrip(",")))
        assert frame.content_digest == sha256_digest(chunk.text.encode())  # D4
        assert verify_chunk(tmp_path, _identity(corpus, n)).status == "valid"


def test_verify_judges_a_chunk_of_cells_by_their_text_not_what_lies_between(
    tmp_path: Path,
) -> None:
    path = tmp_path / "analysis.ipynb"
    path.write_text(_small_cells())
    code = _identity(_corpus(tmp_path), 1)
    assert code.frame_id.startswith("analysis.ipynb#L")
    # Run again: the output of its middle cell, within its lines, changes.
    path.write_text(_small_cells().replace("loaded 1200 rows", "loaded 1300 rows"))
    assert verify_chunk(tmp_path, code).status == "valid"
    path.write_text(_small_cells().replace(PEEK, "df.describe()"))
    verdict = verify_chunk(tmp_path, code)
    assert verdict.status == "stale"
    assert verdict.replacement_digest == sha256_digest(
        f"{IMPORTS}\n\n{LOAD}\n\ndf.describe()".encode()
    )


def test_a_cell_cut_in_several_joins_no_small_cell_beside_it(tmp_path: Path) -> None:
    long = "".join(f"step_{i} = transform(step_{i - 1})\n" for i in range(1, 101))
    cells = [_code(PEEK), _code(long), _code("df.tail()"), _code("df.shape")]
    (tmp_path / "pipeline.ipynb").write_text(_notebook(cells))
    corpus = _corpus(tmp_path)
    labels = [c.citation_label for c in corpus.chunks]
    assert labels[0] == "pipeline.ipynb cell 1 (python)"
    assert all(label.startswith("pipeline.ipynb cell 2 (python) lines") for label in labels[1:-1])
    assert "".join(c.text for c in corpus.chunks[1:-1]) == long  # cut as it was alone
    assert labels[-1] == "pipeline.ipynb cells 3-4 (python)"
    assert corpus.chunks[-1].text == "df.tail()\n\ndf.shape"


def test_a_run_of_small_cells_is_cut_into_chunks_within_the_chunk_bounds(tmp_path: Path) -> None:
    cells = [_code(f"threshold_{i} = {i / 100}") for i in range(1, 121)]
    (tmp_path / "sweep.ipynb").write_text(_notebook(cells))
    corpus = _corpus(tmp_path)
    assert 1 < len(corpus.chunks) < len(cells)
    count = piece_counter()
    numbers: list[int] = []
    for chunk in corpus.chunks:
        place = re.fullmatch(r"cells? (\d+)(?:-(\d+))? \(python\)", chunk.place or "")
        assert place is not None, chunk.place
        first, last = place.groups()
        numbers.extend(range(int(first), int(last or first) + 1))
        # The title line and the text, as ``semantic`` embeds them, fit the model's bound.
        lines = chunk.text.splitlines()
        assert sum(count([chunk.title, *lines])) + 2 <= DEFAULT_CHUNK_TOKENS
        assert len(lines) <= DEFAULT_WINDOW_LINES
    assert numbers == list(range(1, 121))  # every cell once, in order


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("cells:\n  - print('hello')\n", id="not-json"),
        pytest.param(_analysis()[: len(_analysis()) // 2], id="truncated"),
        pytest.param(
            json.dumps(
                {
                    "nbformat": 2,
                    "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1\n"}]}],
                },
                indent=1,
            ),
            id="nbformat-2",
        ),
        pytest.param(json.dumps(json.loads(_analysis())).replace(IMAGE, "QUFB"), id="one-line"),
        pytest.param('{"nbformat": 4, "cells": [' * 2000, id="nested"),
    ],
)
def test_a_notebook_whose_cells_cannot_be_read_is_named_not_indexed(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / "broken.ipynb").write_text(text)
    (tmp_path / "notes.md").write_text(MARKDOWN)
    corpus = _corpus(tmp_path)
    assert {c.rel for c in corpus.chunks} == {"notes.md"}  # the walk goes on
    assert corpus.skipped_paths == {SKIP_NOTEBOOK: ("broken.ipynb",)}
    said = "; not indexed: 1 notebook not readable as nbformat 4 or 3 cells (broken.ipynb)"
    assert not_indexed(corpus) == said


def _notebook_v3(cells: list[dict[str, Any]]) -> str:
    """nbformat 3 JSON as IPython 2 wrote it (sorted keys, indent 1, one worksheet)."""
    nb = {
        "metadata": {"name": "", "signature": "sha256:0f"},
        "nbformat": 3,
        "nbformat_minor": 0,
        "worksheets": [{"cells": cells, "metadata": {}}],
    }
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def test_an_nbformat_3_notebook_is_indexed_as_its_cells_as_a_4_is(tmp_path: Path) -> None:
    heading = {"cell_type": "heading", "level": 1, "metadata": {}, "source": ["Churn analysis"]}
    code = {
        "cell_type": "code",
        "collapsed": False,
        "input": _lines(CODE),
        "language": "python",
        "metadata": {},
        "outputs": [{"output_type": "stream", "stream": "stdout", "text": ["loaded 1200 rows\n"]}],
        "prompt_number": 1,
    }
    text = _notebook_v3([heading, code])
    (tmp_path / "old.ipynb").write_text(text)
    corpus = _corpus(tmp_path)
    assert [(c.text, c.kind, c.citation_label) for c in corpus.chunks] == [
        ("Churn analysis", "doc", "old.ipynb cell 1"),  # a heading cell: markdown, as in 4
        (CODE, "snippet", "old.ipynb cell 2 (python)"),  # its ``input``, not its output
    ]
    assert corpus.skipped == {}
    for n, chunk in enumerate(corpus.chunks):
        (prov,) = chunk_frame(chunk, 0.5).provenance
        assert prov.digest == sha256_digest(address_line_range(text.encode(), prov.range))
        assert verify_chunk(tmp_path, _identity(corpus, n)).status == "valid"


def test_an_nbformat_3_code_cell_is_labelled_with_the_language_it_names(tmp_path: Path) -> None:
    cell = {"cell_type": "code", "input": ["model <- fit(churn)\n"], "language": "R"}
    (tmp_path / "fit.ipynb").write_text(_notebook_v3([cell]))
    (chunk,) = _corpus(tmp_path).chunks
    assert chunk.citation_label == "fit.ipynb cell 1 (r)"


def test_a_warm_start_serves_the_notebook_frames_a_cold_one_did(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "analysis.ipynb").write_text(_analysis())
    cache = tmp_path / "corpus.json"
    cold = _corpus(tmp_path / "tree")
    save_corpus(cold, cache)
    warm = Corpus(CorpusOptions(root=tmp_path / "tree"))
    assert load_corpus(warm, cache)
    warm.refresh()
    assert warm.reads == 0
    frames = [chunk_frame(c, 0.5).to_wire() for c in warm.chunks]
    assert frames == [chunk_frame(c, 0.5).to_wire() for c in cold.chunks]
    assert [f["citation_label"] for f in frames] == [
        "analysis.ipynb cell 1",
        "analysis.ipynb cell 2 (python)",
    ]


def _compose(tmp_path: Path, notebook: str, goal: str) -> tuple[Path, dict[str, Any]]:
    """``hostd compose --json`` of ``goal`` over a project holding ``analysis.ipynb``,
    served by a real ``files`` provider whose root the host trusts (so it re-reads)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "analysis.ipynb").write_text(notebook)
    files = ["python", "-m", "providers.files", "--root", str(project), "--no-cache"]
    config = tmp_path / "hostd.toml"
    config.write_text(
        f'[host]\nsocket = "{tmp_path}/s.sock"\nstate_dir = "{tmp_path}/state"\n'
        f'[[provider]]\nid = "files"\ncommand = {json.dumps(files)}\n'
        f"trusted_roots = [{json.dumps(str(project))}]\ntimeout_ms = 60000\n"
    )
    done = run_hostd("--config", str(config), "compose", "--json", goal)
    assert done.returncode == 0, done.stderr
    composed: dict[str, Any] = json.loads(done.stdout)
    return project, composed


def test_compose_quotes_a_notebooks_markdown_cell_for_a_goal_about_it(tmp_path: Path) -> None:
    project, composed = _compose(tmp_path, _analysis(), "how is customer churn modelled")
    assert 'cite="analysis.ipynb cell 1"' in composed["prompt"]
    assert MARKDOWN.rstrip() in composed["prompt"]
    assert '"source"' not in composed["prompt"] and "iVBOR" not in composed["prompt"]
    entries = {e["frame"]["frame_id"]: e for e in composed["audit"]["entries"]}
    markdown = entries[_corpus(project).chunks[0].chunk_id]
    assert markdown["disposition"] == "included" and markdown["rank"] == 0
    # The host re-read the lines it cites under trusted_roots and they matched (F5).
    assert markdown["verification"]["state"] == "source_verified"


def test_a_notebook_is_held_to_the_size_limit_by_its_cells_not_its_outputs(
    tmp_path: Path,
) -> None:
    # Its image output (about 8 KB) puts the file over a 4 KB limit; its cells are far under.
    (tmp_path / "plots.ipynb").write_text(_analysis())
    (tmp_path / "notes.txt").write_text("x " * 3000)  # a text file over the limit: out
    # Cells whose text alone is over the limit: out, by the same rule as any large file.
    long_cell = "".join(f"total_{i} = compute_total({i})\n" for i in range(400))
    (tmp_path / "long.ipynb").write_text(_notebook([_code(long_cell)]))
    limit = 4096
    assert (tmp_path / "plots.ipynb").stat().st_size > limit
    corpus = Corpus(CorpusOptions(root=tmp_path, max_file_bytes=limit))
    corpus.refresh()
    assert {c.rel for c in corpus.chunks} == {"plots.ipynb"}
    assert sorted(corpus.skipped_paths[SKIP_TOO_LARGE]) == ["long.ipynb", "notes.txt"]
    # Past the factor, a notebook is not read at all.
    small = Corpus(CorpusOptions(root=tmp_path, max_file_bytes=limit // NOTEBOOK_READ_FACTOR))
    small.refresh()
    assert small.chunks == []


def test_compose_quotes_small_code_cells_as_one_block_the_host_reread(tmp_path: Path) -> None:
    project, composed = _compose(tmp_path, _small_cells(), "read the churn csv with pandas")
    assert 'cite="analysis.ipynb cells 2-4 (python)"' in composed["prompt"]
    assert f"{IMPORTS}\n\n{LOAD}\n\n{PEEK}" in composed["prompt"]
    entries = {e["frame"]["frame_id"]: e for e in composed["audit"]["entries"]}
    code = entries[_corpus(project).chunks[1].chunk_id]
    assert code["disposition"] == "included"
    # The host re-read the span of lines it cites, outputs between its cells and all (F5).
    assert code["verification"]["state"] == "source_verified"
