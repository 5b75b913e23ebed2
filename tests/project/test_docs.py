"""README.md and docs/ stay true and readable: fences that close, links that resolve, pasted outputs that a fresh
run of their command prints (tests/docs_blocks.py says how a block names its command).

`python scripts/refresh_docs.py` reruns the commands and rewrites the blocks; this test judges them.
"""

from __future__ import annotations

import re

import pytest

from docs_blocks import LANGUAGES, ROOT, SMALL_MODELS, Runner, blocks, fences, markdown_files, mismatch
from minitransformer.engine.threads import THREADS  # the cores the engine may use

# its commands run as many at a time as the cores (the runner fixture): after the rest of the suite (conftest.py)
pytestmark = pytest.mark.cores
FILES = markdown_files()


def ids(path) -> str:
    return str(path.relative_to(ROOT))


def all_blocks():
    return [b for path in FILES for b in blocks(path)[0]]


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_every_fence_closes_and_no_heading_falls_inside_one(path):
    """The OLMo 2 section once opened a fence it never closed, and the GPT-NeoX section read as code."""
    for f in fences(path):
        assert f.close_line is not None, f"{ids(path)}:{f.open_line + 1}: a fence opened and never closed"
        assert f.info in LANGUAGES or not f.info, f"{ids(path)}:{f.open_line + 1}: language {f.info!r}"
        # in an output or a drawing a line "## ..." can only be a heading the fence swallowed (code has comments)
        headings = [line for line in f.content if re.match(r"^#{1,6} \S", line) and f.info in ("", "text")]
        assert not headings, f"{ids(path)}:{f.open_line + 1}: a heading inside a code block: {headings[0]!r}"


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_a_markdown_parser_reads_the_same_fences_and_headings(path):
    """markdown-it-py (a CommonMark parser) renders the file: the same code blocks, and every heading a heading."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py renders the markdown where installed")
    text = path.read_text(encoding="utf-8")
    tokens = markdown_it.MarkdownIt("commonmark").parse(text)
    theirs = [(t.map[0], t.info.strip()) for t in tokens if t.type == "fence"]
    ours = [(f.open_line, f.info) for f in fences(path)]
    assert theirs == ours
    html = markdown_it.MarkdownIt("commonmark").render(text)
    inside = {k for f in fences(path) for k in range(f.open_line, f.close_line + 1)}
    headings = [line.lstrip("#").strip() for k, line in enumerate(text.splitlines())
                if re.match(r"^#{1,6} \S", line) and k not in inside]  # fmt: skip
    rendered = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<h[1-6]>(.*?)</h[1-6]>", html)]
    assert len(rendered) == len(headings), (rendered, headings)


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_every_pasted_output_is_marked_and_its_paragraph_names_the_command(path):
    found, problems = blocks(path)
    assert problems == []
    for block in found:
        if block.kind == "measured":
            named = re.findall(r"[\w./-]+\.(?:json|py)", block.command)
            assert named and all((ROOT / n).exists() for n in named), f"{block.where}: where did it come from?"
            continue
        command = " ".join(block.command.split())
        assert command in block.prose, f"{block.where}: the paragraph before the block does not say `{command}`"
        if block.excerpt:
            assert len(block.segments()) >= 1 and all(block.segments()), block.where


@pytest.fixture(scope="module")
def runner(request, tmp_path_factory):
    """The commands of the blocks whose tests this session runs, begun at once in the background, as many at a time as
    the cores (Runner.start)."""
    runner = Runner(tmp_path_factory.mktemp("docs-runs"), at_once=THREADS)
    calls = (getattr(item, "callspec", None) for item in request.session.items if item.module is request.module)
    runner.start([call.params["block"] for call in calls if call is not None and "block" in call.params])
    yield runner
    runner.stop()


OUTPUTS = [b for b in all_blocks() if b.kind == "output"]


def test_the_docs_paste_outputs_of_every_kind():
    """A guard on the collection itself: the README's main command, count excerpts, a generate batch, validate."""
    commands = [b.command for b in OUTPUTS]
    assert 'generate "The capital of France is"' in commands
    assert sum(c.startswith("count --preset") for c in commands) >= 10
    assert any(c.startswith("validate") for c in commands) and any(c.startswith("trace") for c in commands)


@pytest.mark.parametrize("block", OUTPUTS, ids=lambda b: b.where)
def test_every_pasted_output_is_what_its_command_prints_now(block, runner):
    if block.flags & set(SMALL_MODELS):
        pytest.importorskip("transformers", reason="scripts/make_small_*.py need transformers and torch")
    if block.command.startswith(("validate", "crosscheck")):
        pytest.importorskip("transformers", reason=f"{block.command.split()[0]} runs transformers (the hf extra)")
    problem = mismatch(block, runner.output(block))
    assert problem is None, f"{block.where}: `{block.command}`: {problem} (python scripts/refresh_docs.py)"


def test_an_excerpt_is_held_to_its_own_command(runner):
    """A block of one preset's count cannot pass as another's: the check would catch the pythia/OLMo mix-up."""
    from docs_blocks import Block, Fence

    olmo = next(b for b in OUTPUTS if b.command.startswith("count --preset olmo-2-7b"))
    swapped = Block(olmo.fence, "output", olmo.flags, "count --preset pythia-1.4b --tokens 100", olmo.prose)
    assert mismatch(swapped, runner.output(swapped)) is not None
    whole = Block(Fence(olmo.fence.path, 0, 1, "", "", olmo.fence.content), "output", set(), olmo.command)
    assert mismatch(whole, runner.output(olmo)) is not None  # an excerpt is not the whole output


SHOWN = re.compile(r"^<!-- (file|from): (\S+) -->$")  # the python block after it: the file whole, or lines of it


def test_code_shown_from_a_file_is_that_file_s():
    """docs/adding-a-family.md walks through a family's whole file (`file:`) and its conformance config (`from:`, lines
    of a file as they stand there, in a row): the example cannot drift from the code it explains, and the family it
    shows stays in one file of under 80 lines (issue 35)."""
    shown = []
    for path in FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        by_line = {f.open_line: f for f in fences(path)}
        for i, line in enumerate(lines):
            marker = SHOWN.match(line.strip())
            if not marker:
                continue
            fence = by_line.get(i + 1)
            assert fence is not None and fence.info == "python", f"{ids(path)}:{i + 1}: no python block right after"
            source, shown_lines = (ROOT / marker[2]).read_text(encoding="utf-8").splitlines(), fence.content
            # where the block starts in the file (its first line's; the whole file's: line 1), and what differs first
            start = 0 if marker[1] == "file" else next((k for k, x in enumerate(source) if x == shown_lines[0]), 0)
            there = source if marker[1] == "file" else source[start : start + len(shown_lines)]
            differs = next((k for k, (a, b) in enumerate(zip(shown_lines, there)) if a != b), None)
            assert shown_lines == there, (
                f"{ids(path)}:{i + 3}: {len(shown_lines)} lines shown, {len(there)} in {marker[2]} from its line "
                f"{start + 1}; the first line that differs, shown and there: "
                f"{(shown_lines[differs], there[differs]) if differs is not None else None}"
            )
            shown.append(marker[2])
    assert "minitransformer/families/smollm3/family.py" in shown, shown
    example = (ROOT / "minitransformer" / "families" / "smollm3" / "family.py").read_text().splitlines()
    assert len(example) < 80, f"the worked example is {len(example)} lines"


LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@pytest.mark.parametrize("path", FILES, ids=ids)
def test_every_local_link_resolves(path):
    text = path.read_text(encoding="utf-8")
    inside = {k for f in fences(path) for k in range(f.open_line, f.close_line + 1)}
    prose = "\n".join(line for k, line in enumerate(text.splitlines()) if k not in inside)
    for match in LINK.finditer(prose):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{ids(path)}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            anchors = {slug(h) for h in re.findall(r"^#{1,6} (.+)$", linked.read_text(encoding="utf-8"), re.M)}
            assert anchor in anchors, f"{ids(path)}: #{anchor} is not a heading of {linked.name}"


def test_the_readme_leads():
    """Under 400 lines: what it is, the two commands with their output, the headline count, how to read the
    ledger, the families with a link each, and the rest linked."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 400
    headings = re.findall(r"^## (.+)$", readme, re.M)
    for wanted in ("Run it", "Run the tests", "Reading the ledger", "The families", "More"):
        assert wanted in headings
    for doc in ("commands.md", "json-and-csv.md", "api.md", "speed.md", "architecture.md", "testing.md"):
        assert f"(docs/{doc})" in readme, doc
    headline = [b for b in blocks(ROOT / "README.md")[0] if b.command.startswith("count --layers 48")]
    assert {"--dense-attention" in b.command for b in headline} == {True, False}  # dense, and as computed
    assert "72,960,000" in readme and "209,518,592,000" in readme


def test_the_families_table_links_every_family_and_names_every_model_type():
    from minitransformer.families.table import ARCHITECTURES

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## The families", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| [")]
    pages = {m.group(1) for row in rows for m in [re.search(r"\]\((docs/families/\w+\.md)\)", row)] if m}
    assert len(rows) == len(ARCHITECTURES) == len(pages)
    assert all((ROOT / page).exists() for page in pages)
    for architecture in ARCHITECTURES.values():
        for model_type in architecture.model_types:
            assert f"`{model_type}`" in table, model_type


def test_the_stale_lines_stay_fresh():
    """What the issue found out of date, held to the code: the model types generate takes, the classes validate
    compares with, the stage names of every family, the package's description."""
    from minitransformer.families.table import ARCHITECTURES, PRESETS
    from minitransformer.models.model import Model

    commands = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    generate = commands.split("## generate", 1)[1].split("\n## ", 1)[0]
    validate = commands.split("## validate", 1)[1].split("\n## ", 1)[0]
    for architecture in ARCHITECTURES.values():
        for model_type, reference in architecture.reference_classes.items():
            assert f"`{model_type}`" in generate, model_type
            assert f"`{reference}`" in validate, reference
    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    names = set(
        re.findall(
            r"`((?:linear_attn|mixer|conv|attn|mlp|moe|attn_hc|ffn_hc|hc_head|ple)\.[\w.]+|embed[\w.]*|post_\w+|final_\w+|ln_\w+|resid_\w+|last|logits)`",
            api,
        )
    )
    for name, config in PRESETS.items():
        span = 1 + max(config.layer_types.index(k) for k in set(config.layer_types))
        stages = Model.without_weights(config.prefix(span)).stage_table.stage_names(span)
        missing = {s.split(".", 2)[2] if s.startswith("blocks.") else s for s in stages} - names
        assert not missing, (name, sorted(missing))
    description = re.search(r'^description = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert all(family in description for family in ("GPT-2", "Llama", "Qwen3", "Gemma", "DeepSeek-V3", "gpt-oss"))


def test_the_refresh_script_rewrites_a_block_from_its_selectors_or_its_old_lines():
    """scripts/refresh_docs.py: selector lines choose an excerpt's runs; a stale excerpt keeps its runs, found again
    by their first lines (or first columns) in the new output."""
    import importlib.util

    from docs_blocks import Block, Fence, refreshed

    spec = importlib.util.spec_from_file_location("refresh_docs", ROOT / "scripts" / "refresh_docs.py")
    refresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refresh)
    output = "model m\n\n  stage  A x B\n  qkv    1,000\n  mix    2,000\n  out    3,000\n\nTotal: 6,000"

    def block(*lines: str) -> Block:
        return Block(Fence(ROOT / "README.md", 0, len(lines) + 1, "", "", list(lines)), "output", {"excerpt"}, "x")

    chosen = refresh.selected(block("@@ ^  stage @@ ^  qkv", "...", "@@ ^Total"), output)
    assert chosen == ["  stage  A x B", "  qkv    1,000", "...", "Total: 6,000"]
    assert refresh.selected(block("@@ ^model @@ ^  stage +1"), output) == [
        "model m",
        "",
        "  stage  A x B",
        "  qkv    1,000",
    ]
    stale = block("  qkv    999", "  mix    999", "...", "Total: 5")
    assert refreshed(stale, output) == ["  qkv    1,000", "  mix    2,000", "...", "Total: 6,000"]
    assert mismatch(block(*refreshed(stale, output)), output) is None


def test_testing_md_names_every_config_class_the_conformance_suite_builds():
    """docs/testing.md named 29 of the 45 classes once the suite had grown: the list and the suite are compared."""
    built = set(re.findall(r"\b([A-Z]\w*Config)\b", (ROOT / "tests/families/conformance_configs.py").read_text()))
    testing = (ROOT / "docs/testing.md").read_text(encoding="utf-8")
    listed = testing.split("`tests/family_checks.py` from transformers' ", 1)[1].split(", several", 1)[0]
    named = set(re.findall(r"`(\w+Config)`", listed))
    assert named == built, (
        f"in the suite, not the doc: {sorted(built - named)}; the doc's alone: {sorted(named - built)}"
    )
