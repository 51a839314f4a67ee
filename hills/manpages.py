"""The man pages: one reStructuredText source per page in man/ (such as
man/hills-eval.1.rst, in git's page layout, sharing paragraphs from
man/include/), rendered by docutils' man writer into the troff page beside
it. What the code knows is generated into the sources between markers.

    python -m hills.manpages [--check] [MANDIR]
    python -m hills.manpages --install PREFIX

fills the generated blocks of every source in MANDIR (the checkout's man/
by default) and renders each page whose source changed. With --check it
writes nothing and exits 1 naming every generated block that is stale
against the commands, every page whose source changed since it was
rendered, and every page or source missing or left over. --install copies
the rendered pages under PREFIX/share/man, where man finds them for
PREFIX/bin on PATH. docutils is needed only to render.
"""

import argparse
import hashlib
import inspect
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import click

from . import __version__
from .cli import registry as cli
from .disk import manifest
from .evidence import report

MANUAL = "Hills Manual"
SOURCE = f"hills {__version__}"
SOURCE_SUFFIX = ".rst"
WIDTH = 78
SYNOPSIS_WIDTH = 70
BEGIN = ".. begin-generated: "
END = ".. end-generated"
HELP_TEXT = "Print the usage and a summary of the options, and exit."
# Line-block lines are indented with no-break spaces: rST reads leading
# spaces there as a nested block, which the man writer indents by 2 only.
PAD = "\u00a0"

# Names only hills gives its pages: an installed page of this shape that is
# no longer rendered is a removed command's, never another package's.
OWN_PAGE = re.compile(r"^(hills|git-hill)(-[a-z0-9-]+)?\.1$|^(hill\.yaml|hills-[a-z0-9-]+)\.5$")
_PAGE = re.compile(r"^[a-z][a-z0-9.-]*\.[1-8]$")
_BANNER = re.compile(r'^\.\\" Source sha256:([0-9a-f]{64}), docutils (\S+)\.$', re.MULTILINE)
_INCLUDE = re.compile(r"^\s*\.\. include:: (\S+)\s*$", re.MULTILINE)
_REF = re.compile(r"^([a-z][a-z0-9.-]*[a-z0-9]|[a-z])\(([1-8])\)$")


class Problem(NamedTuple):
    """Something --check finds: its kind, the file it is about, a detail."""

    kind: str
    path: str
    detail: str = ""


class RenderError(Exception):
    """A source docutils cannot render without a warning, or no docutils."""


# ---------------------------------------------------------------- text to rST

_INLINE = re.compile(r"`([^`]+)`|\b([a-z][a-z0-9.-]*[a-z0-9]|[a-z])\(([1-8])\)")
_BEFORE = " \t\n-:/'\"<([{"
_AFTER = " \t\n-.,:;!?\\/'\")]}>"


def _escape(text: str) -> str:
    """Plain text as rST reads it literally."""
    # `@` would make a word an e-mail address.
    text = re.sub(r"([\\*`|@])", r"\\\1", text)
    return re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", text)


def rst_inline(text: str) -> str:
    """rST for text in the help texts' and key table's markup: `code` in
    backquotes, NAME(N) for a page; the rest is plain."""
    out, position = [], 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[position:match.start()]))
        if match.group(1) is not None:
            markup = f"``{match.group(1)}``"
        else:
            markup = f":manpage:`{match.group(2)}({match.group(3)})`"
        before = "".join(out)[-1:]
        if before and before not in _BEFORE:
            markup = "\\ " + markup
        after = text[match.end():match.end() + 1]
        if after and after not in _AFTER:
            markup += "\\ "
        out.append(markup)
        position = match.end()
    out.append(_escape(text[position:]))
    return "".join(out)


def _paragraph(text: str, indent: str = "") -> str:
    return textwrap.fill(rst_inline(" ".join(text.split())), WIDTH, initial_indent=indent,
                         subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def _paragraphs(text: str) -> str:
    return "\n\n".join(_paragraph(chunk) for chunk in re.split(r"\n[ \t]*\n", text.strip()) if chunk.strip())


def _item(term: str, body: str) -> str:
    """One definition-list item."""
    return term + "\n" + _paragraph(body, "    ")


def _title(text: str, mark: str, over: bool = False) -> str:
    line = mark * len(text)
    return f"{line}\n{text}\n{line}" if over else f"{text}\n{line}"


def help_text(command: click.Command) -> str:
    """A command's help as click shows it: dedented, cut at a form feed."""
    text = inspect.cleandoc(command.help or "")
    return text.split("\f", 1)[0].strip()


def short_help(command: click.Command) -> str:
    """The one-line summary click derives for `hills --help` (never cut short)."""
    return command.get_short_help_str(limit=1000).rstrip(".")


# ---------------------------------------------------------------- the commands

def _context(command: click.Command, prog: str, parent: click.Context | None = None) -> click.Context:
    return click.Context(command, info_name=prog, parent=parent, **command.context_settings)


def _subcommands(group: click.Group, ctx: click.Context) -> Iterator[tuple[str, click.Command]]:
    """The visible commands of a group, in the order it lists them."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            yield name, command


def _root() -> tuple[click.Group, click.Context]:
    group = cli.main_group
    assert isinstance(group, click.Group)
    return group, _context(group, "hills")


def verbs() -> list[str]:
    """The verbs that get a page: every command not hidden."""
    group, ctx = _root()
    return [name for name, _ in _subcommands(group, ctx)]


def _verb(verb: str) -> click.Command:
    group, ctx = _root()
    command = group.get_command(ctx, verb)
    if command is None:
        raise KeyError(verb)
    return command


def _is_help(param: click.Parameter, ctx: click.Context) -> bool:
    return isinstance(param, click.Option) and bool(set(param.opts) & set(ctx.help_option_names))


def _metavar(param: click.Parameter, ctx: click.Context) -> str:
    try:
        return param.make_metavar(ctx)  # type: ignore[call-arg, unused-ignore]
    except TypeError:  # click before 8.2
        return param.make_metavar()  # type: ignore[call-arg, unused-ignore]


def _strong(text: str) -> str:
    return "**" + text.replace("*", "\\*") + "**"


def _emphasis(text: str) -> str:
    return "*" + text.replace("*", "\\*") + "*"


def _usage_pieces(command: click.Command, ctx: click.Context) -> list[tuple[str, str]]:
    """[(plain, rst)] for each option and argument, as a synopsis shows them."""
    pieces = []
    params = command.get_params(ctx)
    for param in params:
        if not isinstance(param, click.Option) or param.hidden or _is_help(param, ctx):
            continue
        short = [opt for opt in param.opts if len(opt) == 2]
        flag = (short or param.opts)[0]
        plain, rst = flag, _strong(flag)
        if not param.is_flag:
            metavar = _metavar(param, ctx)
            plain, rst = f"{plain} {metavar}", f"{rst} {_emphasis(metavar)}"
        if not param.required:
            plain, rst = f"[{plain}]", f"[{rst}]"
        if param.multiple:
            plain, rst = plain + "...", rst + "..."
        pieces.append((plain, rst))
    for param in params:
        if isinstance(param, click.Argument):
            metavar = _metavar(param, ctx)
            pieces.append((metavar, _emphasis(metavar)))
    return pieces


def _short_form(command: click.Command, ctx: click.Context) -> list[tuple[str, str]]:
    """`[OPTIONS] ARGS` as click's usage line has it."""
    pieces = []
    for piece in command.collect_usage_pieces(ctx):
        if piece.startswith("[OPTIONS]"):
            pieces.append((piece, piece.replace("OPTIONS", _emphasis("OPTIONS"), 1)))
        else:
            pieces.append((piece, _emphasis(piece)))
    return pieces


def _synopsis_lines(prog: str, pieces: list[tuple[str, str]]) -> list[str]:
    """One synopsis entry as line-block lines, wrapped by hand."""
    indent = PAD * (len(prog) + 1)
    lines, width = [_strong(prog)], len(prog)
    for plain, rst in pieces:
        if width + 1 + len(plain) > SYNOPSIS_WIDTH:
            lines.append(indent + rst)
            width = len(indent) + len(plain)
        else:
            lines[-1] += " " + rst
            width += 1 + len(plain)
    return lines


def _synopsis(entries: Iterable[tuple[str, list[tuple[str, str]]]]) -> str:
    return "\n".join("| " + line for prog, pieces in entries for line in _synopsis_lines(prog, pieces))


def _standalone(verb: str) -> list[str]:
    return [name for name, target in cli.STANDALONE.items() if target == verb]


def _options(command: click.Command, ctx: click.Context, *, options: bool = True,
             help_item: str | None = HELP_TEXT) -> str:
    """Definition-list items for a command's options (and its -h)."""
    items = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or param.hidden:
            continue
        is_help = _is_help(param, ctx)
        if (is_help and help_item is None) or (not is_help and not options):
            continue
        names = sorted(param.opts, key=len) + list(param.secondary_opts)
        term = ", ".join(_strong(name) for name in names)
        if not param.is_flag and not is_help:
            term += " " + _emphasis(_metavar(param, ctx))
        if is_help:
            text = help_item or ""
        else:
            text = " ".join((param.help or "").split())
            if param.required:
                text += " Required."
            if param.show_default and param.default not in (None, False, ()):
                text += f" Default: `{param.default}`."
        items.append(_item(term, text))
    return "\n\n".join(items)


def arguments(command: click.Command, prog: str) -> list[str]:
    """The metavars of a command's arguments (of every subcommand for a group)."""
    ctx = _context(command, prog)
    if isinstance(command, click.Group):
        found: list[str] = []
        for name, sub in _subcommands(command, ctx):
            found += [metavar for metavar in arguments(sub, name) if metavar not in found]
        return found
    return [_metavar(param, ctx) for param in command.get_params(ctx) if isinstance(param, click.Argument)]


# ---------------------------------------------------------------- generated blocks

def _name_block(page: str, summary: str) -> str:
    summary = summary[:1].lower() + summary[1:] if summary[1:2].islower() else summary
    return _title(page, "=", over=True) + "\n\n" + _title(_escape(summary), "-", over=True)


def _names_paragraph(verb: str) -> str:
    names = [f"`git hill {verb}`"] + [f"`{name}`" for name in _standalone(verb)]
    return _paragraph(f"This command is also {' and '.join(names)}: the same command, with the same "
                      "options, output and exit status.")


def _verb_blocks(verb: str) -> dict[str, str]:
    command = _verb(verb)
    ctx = _context(command, f"hills {verb}")
    progs = [f"git hill {verb}"] + _standalone(verb)
    blocks = {"name": _name_block(f"hills-{verb}", short_help(command)),
              "description": _paragraphs(help_text(command)),
              "names": _names_paragraph(verb)}
    if isinstance(command, click.Group):
        blocks.update(_group_blocks(command, ctx, [f"hills {verb}"] + progs))
    else:
        entries = [(f"hills {verb}", _usage_pieces(command, ctx))]
        entries += [(prog, _short_form(command, ctx)) for prog in progs]
        blocks["synopsis"] = _synopsis(entries)
        blocks["options"] = _options(command, ctx)
    return blocks


def _group_blocks(group: click.Group, ctx: click.Context, progs: list[str]) -> dict[str, str]:
    """A verb with subcommands: a synopsis line and a COMMANDS subsection
    for each, -h once, then the options of each subcommand."""
    subcommands = [(name, sub, _context(sub, name)) for name, sub in _subcommands(group, ctx)]
    synopsis = _synopsis((f"{prog} {name}", _usage_pieces(sub, sub_ctx))
                         for prog in progs for name, sub, sub_ctx in subcommands)
    commands = "\n\n".join(_title(name, "-") + "\n\n" + _paragraphs(help_text(sub))
                           for name, sub, _ in subcommands)
    if not subcommands:
        return {"synopsis": synopsis, "commands": commands, "options": _options(group, ctx)}
    _, first, first_ctx = subcommands[0]
    options = [_options(first, first_ctx, options=False)]
    for name, sub, sub_ctx in subcommands:
        own = _options(sub, sub_ctx, help_item=None)
        if own:
            options.append(_title(name, "-") + "\n\n" + own)
    return {"synopsis": synopsis, "commands": commands, "options": "\n\n".join(options)}


def _commands_list(prefix: str) -> str:
    group, ctx = _root()
    return "\n\n".join(_item(f"{_strong(prefix + verb)}, :manpage:`hills-{verb}(1)`", short_help(command) + ".")
                       for verb, command in _subcommands(group, ctx))


def _main_blocks(prog: str) -> dict[str, str]:
    """hills.1 and git-hill.1: the group and the list of verbs."""
    group, _ = _root()
    ctx = _context(group, prog)
    help_flags = ("[-h | --help]", f"[{_strong('-h')} | {_strong('--help')}]") if prog == "hills" \
        else ("[-h]", f"[{_strong('-h')}]")
    pieces = _usage_pieces(group, ctx) + [help_flags, ("VERB", _emphasis("VERB")),
                                          ("[ARGS]...", f"[{_emphasis('ARGS')}]...")]
    blocks = {"synopsis": _synopsis([(prog, pieces)]), "commands": _commands_list(prog + " ")}
    if prog == "hills":
        blocks["name"] = _name_block("hills", short_help(group))
        blocks["description"] = _paragraphs(help_text(group))
        blocks["options"] = _options(group, ctx)
    else:
        blocks["options"] = _options(group, ctx, help_item=None)
    return blocks


def _definitions(entries: dict[str, tuple[str, str]]) -> str:
    return "\n\n".join(_item(f"``{term}``" + (f" ({kind})" if kind else ""), text)
                       for term, (kind, text) in entries.items())


def blocks(page: str) -> dict[str, str]:
    """{block name: rST} for every block generated into the source of
    `page` (a file name such as hills-eval.1)."""
    if page == "hills.1":
        return _main_blocks("hills")
    if page == "git-hill.1":
        return _main_blocks("git hill")
    if page == "hill.yaml.5":
        return {"keys": _definitions(manifest.key_docs()),
                "params": _definitions(manifest.key_docs(manifest.PARAM_KEYS)),
                "metrics": _definitions(manifest.key_docs(manifest.METRIC_KEYS))}
    match = re.fullmatch(r"hills-([a-z0-9-]+)\.1", page)
    if match and match.group(1) in verbs():
        return _verb_blocks(match.group(1))
    return {}


def _marked(text: str) -> Iterator[tuple[str, int, int]]:
    """(block name, first line, end line) of each marked block of a source;
    ValueError for a marker without its pair."""
    lines = text.split("\n")
    start, name = None, ""
    for number, line in enumerate(lines):
        if line.startswith(BEGIN):
            if start is not None:
                raise ValueError(f"line {number + 1}: '{BEGIN.strip()}' inside block '{name}'")
            start, name = number, line[len(BEGIN):].strip()
        elif line.strip() == END:
            if start is None:
                raise ValueError(f"line {number + 1}: '{END}' without '{BEGIN.strip()}'")
            yield name, start + 1, number
            start = None
    if start is not None:
        raise ValueError(f"line {start + 1}: block '{name}' has no '{END}'")


def marked_blocks(text: str) -> dict[str, str]:
    """{block name: rST} as a source holds them."""
    lines = text.split("\n")
    return {name: "\n".join(lines[first:end]).strip("\n") for name, first, end in _marked(text)}


def fill(text: str, generated: dict[str, str]) -> str:
    """The source with each marked block holding what is generated for it;
    a block nothing generates is left as it is."""
    lines = text.split("\n")
    for name, first, end in reversed(list(_marked(text))):
        if name in generated:
            lines[first:end] = ["", *generated[name].split("\n"), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- sources and pages

def default_man_dir() -> str:
    """The checkout's man/ folder, else man/ in the current folder."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "pyproject.toml")):
        return os.path.join(root, "man")
    return "man"


def command_pages() -> list[str]:
    """The pages the commands call for: hills(1), git-hill(1) (`git hill
    --help` makes git open it) and hills-VERB(1) for each visible verb."""
    return ["hills.1", "git-hill.1"] + [f"hills-{verb}.1" for verb in verbs()]


def sources(man_dir: str) -> list[str]:
    """The pages that have a source in `man_dir`, sorted."""
    try:
        names = os.listdir(man_dir)
    except FileNotFoundError:
        return []
    return sorted(name[:-len(SOURCE_SUFFIX)] for name in names
                  if name.endswith(SOURCE_SUFFIX) and _PAGE.match(name[:-len(SOURCE_SUFFIX)]))


def _rendered(man_dir: str) -> list[str]:
    try:
        return sorted(name for name in os.listdir(man_dir) if _PAGE.match(name))
    except FileNotFoundError:
        return []


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _substitutions() -> str:
    """What sources may write as |name|: values the code holds."""
    return f"\n\n.. |report_version| replace:: {report.REPORT_VERSION}\n"


def source_digest(man_dir: str, page: str, text: str) -> str:
    """sha256 over what a page is rendered from: its source, the files it
    includes and the values the renderer puts in."""
    digest = hashlib.sha256()
    parts = [("source", text), ("substitutions", _substitutions()), ("version", SOURCE)]
    for include in _INCLUDE.findall(text):
        parts.append((include, _read(os.path.join(man_dir, include)) or ""))
    for name, part in parts:
        digest.update(f"{name}\0{part}\0".encode())
    return digest.hexdigest()


def _recorded(page_text: str) -> tuple[str, str] | None:
    """(digest, docutils version) a rendered page says it came from."""
    match = _BANNER.search(page_text.split(".TH", 1)[0])
    return (match.group(1), match.group(2)) if match else None


def _docutils_version() -> str | None:
    try:
        import docutils  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    return str(docutils.__version__)


def _roff(text: str) -> str:
    return text.replace("\\", "\\e").replace("-", "\\-")


def _manpage_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
                  options: dict[str, Any] | None = None,
                  content: list[str] | None = None) -> tuple[list[Any], list[Any]]:
    """:manpage:`NAME(N)`: the page's name in bold, its section after it."""
    from docutils import nodes  # type: ignore[import-untyped, unused-ignore]

    match = _REF.match(text)
    if match is None:
        message = inliner.reporter.error(f"not a man page reference: {text!r} (want NAME(N))", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    return [nodes.strong(match.group(1), match.group(1)), nodes.Text(f"({match.group(2)})")], []


def _writer(page: str, digest: str) -> Any:
    """docutils' man writer, with git's page header: the title in capitals,
    the hills version and manual, a NAME section, no hyphenation and a
    ragged right margin."""
    from docutils.writers import manpage  # type: ignore[import-untyped, unused-ignore]

    section = page.rsplit(".", 1)[1]

    class Translator(manpage.Translator):
        document_start = (f'Generated by "python -m hills.manpages" from {page}{SOURCE_SUFFIX}; do not edit.\n'
                          f"Source sha256:{digest}, docutils {_docutils_version()}.")

        def header(self) -> str:
            info = self._docinfo
            if info["title"] != page.rsplit(".", 1)[0]:
                raise RenderError(f"the title of {page}{SOURCE_SUFFIX} is {info['title']!r}, "
                                  f"not the page's name {page.rsplit('.', 1)[0]!r}")
            return (f'.TH "{_roff(info["title"].upper())}" "{section}" "" "{_roff(SOURCE)}" "{MANUAL}"\n'
                    # No hyphenation, also after an example (.EE restores HY).
                    ".nh\n.nr HY 0\n.ad l\n"
                    f'.SH NAME\n{_roff(info["title"])} \\- {_roff(info["subtitle"])}\n')

        def visit_comment(self, node: Any) -> None:
            from docutils import nodes  # type: ignore[import-untyped, unused-ignore]

            raise nodes.SkipNode

    class Writer(manpage.Writer):
        def __init__(self) -> None:
            super().__init__()
            self.translator_class = Translator

    return Writer()


def render(man_dir: str, page: str, text: str) -> str:
    """The troff page docutils renders from `text`, the source of `page`;
    RenderError for a source with any problem docutils warns of."""
    try:
        from docutils.core import publish_string  # type: ignore[import-untyped, unused-ignore]
        from docutils.parsers.rst import roles  # type: ignore[import-untyped, unused-ignore]
        from docutils.utils import SystemMessage  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        raise RenderError("docutils is not installed: pip install -e '.[man]'") from None
    roles.register_local_role("manpage", _manpage_role)
    path = os.path.join(man_dir, page + SOURCE_SUFFIX)
    settings = {"report_level": 5, "halt_level": 2, "_disable_config": True, "input_encoding": "utf-8",
                "output_encoding": "utf-8", "language_code": "en", "raw_enabled": False,
                "smart_quotes": False}
    try:
        output = publish_string(text + _substitutions(), source_path=path, writer=_writer(page, source_digest(
            man_dir, page, text)), settings_overrides=settings)
    except SystemMessage as exc:
        raise RenderError(str(exc)) from None
    return output.decode("utf-8") if isinstance(output, bytes) else str(output)


def _source_problems(man_dir: str, page: str, text: str) -> list[Problem]:
    """What is wrong with a source on its own: markers, stale or missing
    blocks, undescribed arguments."""
    path = os.path.join(man_dir, page + SOURCE_SUFFIX)
    try:
        held = marked_blocks(text)
    except ValueError as exc:
        return [Problem("markers", path, str(exc))]
    generated = blocks(page)
    problems = [Problem("no-block", path, name) for name in generated if name not in held]
    problems += [Problem("unknown-block", path, name) for name in held if name not in generated]
    problems += [Problem("block", path, name) for name in generated
                 if name in held and held[name] != generated[name]]
    if page.startswith("hills-") and page.endswith(".1") and page[6:-2] in verbs():
        verb = page[6:-2]
        described = set(re.findall(r"^\*([^*\n]+)\*$", text, re.MULTILINE))
        problems += [Problem("argument", path, f"{metavar} of 'hills {verb}'")
                     for metavar in arguments(_verb(verb), f"hills {verb}") if metavar not in described]
    return problems


def check(man_dir: str, *, compare_rendering: bool = True) -> list[Problem]:
    """Every problem with the sources and pages in `man_dir`. A page is
    stale when its source (with what it includes) changed since it was
    rendered; with the docutils that rendered it installed, also when it
    differs from what that docutils renders now (a page edited by hand)."""
    problems = []
    have = sources(man_dir)
    for page in command_pages():
        if page not in have:
            problems.append(Problem("no-source", os.path.join(man_dir, page + SOURCE_SUFFIX)))
    wanted = set(command_pages())
    docutils_version = _docutils_version() if compare_rendering else None
    for page in have:
        source_path = os.path.join(man_dir, page + SOURCE_SUFFIX)
        if page.endswith(".1") and page not in wanted:
            problems.append(Problem("unused-source", source_path))
            continue
        text = _read(source_path) or ""
        problems += _source_problems(man_dir, page, text)
        page_path = os.path.join(man_dir, page)
        current = _read(page_path)
        if current is None:
            problems.append(Problem("missing", page_path))
            continue
        recorded = _recorded(current)
        if recorded is None or recorded[0] != source_digest(man_dir, page, text):
            problems.append(Problem("stale", page_path))
        elif recorded[1] == docutils_version:
            try:
                fresh = render(man_dir, page, text)
            except RenderError as exc:
                problems.append(Problem("render", source_path, str(exc)))
                continue
            if fresh != current:
                problems.append(Problem("edited", page_path))
    for page in _rendered(man_dir):
        if page not in have:
            problems.append(Problem("extra", os.path.join(man_dir, page)))
    return problems


def update(man_dir: str) -> tuple[list[str], list[str]]:
    """Fill every source's generated blocks, render each page that is
    stale, missing or edited, remove pages of this project that have no
    source; return (written paths, removed paths). RenderError when a
    source cannot be rendered."""
    written, removed = [], []
    for page in sources(man_dir):
        source_path = os.path.join(man_dir, page + SOURCE_SUFFIX)
        text = _read(source_path) or ""
        try:
            filled = fill(text, blocks(page))
        except ValueError as exc:
            raise RenderError(f"{source_path}: {exc}") from None
        if filled != text:
            _write(source_path, filled)
            written.append(source_path)
    for problem in check(man_dir):
        page = os.path.basename(problem.path)
        if problem.kind in ("missing", "stale", "edited"):
            text = _read(os.path.join(man_dir, page + SOURCE_SUFFIX)) or ""
            _write(problem.path, render(man_dir, page, text))
            written.append(problem.path)
        elif problem.kind == "extra" and OWN_PAGE.match(page):
            os.unlink(problem.path)
            removed.append(problem.path)
    return written, removed


def pages(man_dir: str | None = None) -> dict[str, str]:
    """{file name: troff text} of every rendered page that has a source."""
    man_dir = man_dir or default_man_dir()
    found = {}
    for page in sources(man_dir):
        text = _read(os.path.join(man_dir, page))
        if text is not None:
            found[page] = text
    return found


def install(prefix: str, rendered: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Put the pages where man finds them for programs in PREFIX/bin:
    PREFIX/share/man/manN/. An editable install (`pip install -e`) skips
    the wheel's data files, so a checkout's venv gets its pages from here.
    Writes the pages that changed, removes hills pages no longer rendered,
    leaves other pages alone; returns (written paths, removed paths)."""
    rendered = rendered if rendered is not None else pages()
    written, removed = [], []
    for section in sorted({name.rsplit(".", 1)[1] for name in rendered}):
        folder = os.path.join(prefix, "share", "man", f"man{section}")
        own = {name: text for name, text in rendered.items() if name.endswith("." + section)}
        os.makedirs(folder, exist_ok=True)
        for name in sorted(set(os.listdir(folder)) - set(own)):
            if OWN_PAGE.match(name):
                os.unlink(os.path.join(folder, name))
                removed.append(os.path.join(folder, name))
        for name, text in sorted(own.items()):
            path = os.path.join(folder, name)
            if _read(path) != text:
                _write(path, text)
                written.append(path)
    return written, removed


MESSAGES = {
    "no-source": "error: no man page source '{path}': write it (a neighbour shows the layout)",
    "unused-source": "error: man page source '{path}' documents no hills command",
    "markers": "error: man page source '{path}': {detail}",
    "no-block": "error: man page source '{path}' has no generated block '{detail}'",
    "unknown-block": "error: man page source '{path}' has a generated block '{detail}' that nothing generates",
    "block": "error: generated block '{detail}' of '{path}' is out of date",
    "argument": "error: man page source '{path}' does not describe the argument {detail}",
    "missing": "error: man page '{path}' is missing",
    "stale": "error: man page '{path}' is out of date with its source",
    "edited": "error: man page '{path}' differs from what its source renders to",
    "render": "error: {detail}",
    "extra": "error: man page '{path}' has no source",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hills.manpages",
                                     description="Render the hills man pages from their sources in man/.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a generated block or a page is stale, missing or left over")
    parser.add_argument("--install", metavar="PREFIX",
                        help="install the rendered pages under PREFIX/share/man (PREFIX: a venv)")
    parser.add_argument("man_dir", nargs="?", default=None, metavar="MANDIR",
                        help="the sources and pages (default: the checkout's man/)")
    args = parser.parse_args(argv)
    if args.install:
        if args.check or args.man_dir:
            parser.error("--install takes neither --check nor MANDIR")
        written, removed = install(args.install)
        if written or removed:
            print(f"{len(written)} man page(s) installed, {len(removed)} removed, in "
                  f"{os.path.join(args.install, 'share', 'man')}", file=sys.stderr)
        return 0
    man_dir = args.man_dir or default_man_dir()
    if not args.check:
        try:
            written, removed = update(man_dir)
        except RenderError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for path in written:
            print(path)
        for path in removed:
            print(f"removed {path}", file=sys.stderr)
    problems = check(man_dir)
    for problem in problems:
        print(MESSAGES[problem.kind].format(path=problem.path, detail=problem.detail), file=sys.stderr)
    if problems:
        if args.check:
            print("hint: run 'python -m hills.manpages' to regenerate the pages", file=sys.stderr)
        return 1
    if not args.check:
        print(f"{len(written)} file(s) written, {len(removed)} removed, in {man_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
