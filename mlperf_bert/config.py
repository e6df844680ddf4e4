"""Validation of a YAML document against its schema (schemas/config.schema.yaml for the workflow configuration,
schemas/platform.schema.yaml for a platform file), with errors a user can act on."""
from __future__ import annotations
import functools
from pathlib import Path
from typing import Any

from mlperf_bert.errors import UserError
from mlperf_bert.urls import redact, refuse_url_credentials

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
CONFIG_SCHEMA = SCHEMAS / "config.schema.yaml"      # the workflow config
PLATFORM_SCHEMA = SCHEMAS / "platform.schema.yaml"  # a platform file, and the config's `train:` overrides

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
               type(None): "null"}


class _Alias(Exception):
  def __init__(self, anchor: str, line: int):
    super().__init__(anchor, line)
    self.anchor, self.line = anchor, line


def _no_alias_loader():
  import yaml

  class Loader(yaml.SafeLoader):
    def compose_node(self, parent, index):
      if self.check_event(yaml.AliasEvent):
        ev = self.peek_event()
        raise _Alias(ev.anchor, ev.start_mark.line + 1)
      return super().compose_node(parent, index)
  return Loader


def safe_yaml(text: str, where: str) -> Any:
  """YAML parsed with aliases refused: nine levels of `*alias` ("billion laughs") expand to gigabytes in whatever
  walks the value (validation, merging), so a config or platform file writes its values out. yaml.YAMLError
  for bad syntax, UserError (one line) for an alias."""
  import yaml
  try:
    return yaml.load(text, Loader=_no_alias_loader())
  except _Alias as e:
    raise UserError(f"{where}:{e.line}: YAML alias *{e.anchor}: aliases are refused in this file (a few nested "
                    "ones expand to gigabytes); write the value out instead of referring to an anchor") from None


def precheck_config_files(*paths: str | Path) -> None:
  """Raise UserError for the first of `paths` (config files) that holds a YAML alias or a URL with credentials
  (mlperf_bert/urls.py); missing files and YAML syntax errors are left to Snakemake, which names them itself."""
  import yaml
  for p in paths:
    if Path(p).is_file():
      try: doc = safe_yaml(Path(p).read_text(encoding="utf-8", errors="replace"), str(p))
      except yaml.YAMLError: continue
      refuse_url_credentials(doc, str(p))


def snakemake_configfiles(argv: list[str]) -> list[Path] | None:
  """The config files `snakemake ARGV...` would load (its --configfile values and its profiles' `configfile`), found
  by Snakemake's own parser without loading them; None when the arguments are not a run (--help, --version, an
  argument Snakemake refuses): Snakemake then says so itself."""
  import contextlib, io
  from snakemake.cli import parse_args
  try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
      _, args = parse_args(list(argv))
  except (SystemExit, Exception):
    return None
  return [Path(f) for f in (args.configfile or [])]


def check_config_files(paths: list[str | Path], base: str | Path) -> dict[str, Any]:
  """What `snakemake --configfile PATHS...` would run with, checked without Snakemake (which loads and merges a
  config file itself before any of this workflow's code runs, so a file of nested YAML aliases exhausts its memory
  there): each file free of aliases and of URL credentials and a YAML mapping, then `base` (config.yaml) updated
  with them, typed and validated.
  Returns the merged config; UserError naming the file (or every bad key) otherwise."""
  import yaml
  merged = safe_yaml(Path(base).read_text(encoding="utf-8"), str(base))
  refuse_url_credentials(merged, str(base))
  for p in paths:
    try: doc = safe_yaml(Path(p).read_text(encoding="utf-8", errors="replace"), str(p))
    except OSError as e: raise UserError(f"{p}: cannot read it ({e.strerror}); check the path") from None
    except yaml.YAMLError as e:
      raise UserError(f"{p}: not valid YAML ({redact(' '.join(str(e).split()))}); fix its syntax") from None
    refuse_url_credentials(doc, str(p))
    if not isinstance(doc, dict):
      raise UserError(f"{p}: a config file is a mapping of keys (basedir: ..., seeds: [...]), got a "
                      f"{type(doc).__name__}; write it as config.yaml is written")
    _merge(merged, doc)
  merged = typed_config(merged)
  validate_config(merged, CONFIG_SCHEMA, source=", ".join(map(str, paths)) or str(base))
  return merged


def _merge(into: dict, over: dict) -> None:
  """Snakemake's merge of a config file over the config: mappings recursively, any other value replaced."""
  for k, v in over.items():
    if isinstance(v, dict) and isinstance(into.get(k), dict): _merge(into[k], v)
    else: into[k] = v


# top-level folders of the system: never a basedir themselves; those of the first group never hold one either
_SYSTEM = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr")
_TOP = ("/home", "/mnt", "/media", "/opt", "/root", "/run", "/srv", "/tmp", "/var", "/var/tmp", "/scratch")


def check_basedir(basedir: str, *, repo: Path, workdir: Path) -> Path:
  """The basedir as a resolved path, or UserError (one line) when it is a dangerous place for a run's outputs: the
  filesystem root, a system folder or one inside it, a top-level folder (/home, /tmp, ...), the home folder, the
  checkout or a folder above it, a folder above the working directory, or a file (or a path under one)."""
  full = (workdir / basedir).resolve()
  repo, workdir = repo.resolve(), workdir.resolve()
  why = None
  if full == Path(full.anchor):
    why = "the filesystem root"
  elif any(full == Path(d) or full.is_relative_to(d) for d in _SYSTEM):
    why = "a system folder"
  elif str(full) in _TOP or full == Path.home().resolve():
    why = "a folder shared by everything on the machine"
  elif repo.is_relative_to(full):
    why = f"{'the checkout' if full == repo else 'above the checkout'} ({repo}): outputs would mix with the source"
  elif workdir != full and workdir.is_relative_to(full):
    why = f"above the working directory ({workdir})"
  else:
    blocker = next((p for p in (full, *full.parents) if p.exists()), None)  # the nearest existing path
    if blocker is not None and not blocker.is_dir():
      why = "a file, not a folder" if blocker == full else f"under {blocker}, which is a file, not a folder"
  if why:
    raise UserError(f"basedir {basedir!r} is {full}, {why}; every artifact and `--delete-all-output` go there: set "
                    "basedir (config.yaml, --configfile or --config basedir=...) to a folder of its own, e.g. "
                    "results/<name>")
  return full


def load_schema(schema_path: str | Path) -> dict[str, Any]:
  """The schema file, parsed once per content (read-only: callers must not change it). The workflow resolves a
  seed's settings per seed and job, so parsing the YAML each time made planning many seeds slow."""
  text = Path(schema_path).read_text()
  return _parsed_schema(text)[0]


@functools.lru_cache(maxsize=16)
def _parsed_schema(text: str) -> tuple[dict[str, Any], Any]:
  """(schema, its jsonschema validator) of a schema's text."""
  import jsonschema, yaml
  schema = yaml.safe_load(text)
  return schema, jsonschema.Draft202012Validator(schema)


def _fits(value: Any, types: list[str]) -> bool:
  return any({"object": isinstance(value, dict), "array": isinstance(value, list), "string": isinstance(value, str),
              "integer": isinstance(value, int) and not isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool),
              "boolean": isinstance(value, bool), "null": value is None}.get(t, False) for t in types)


def parse_text_values(doc: Any, schema: dict[str, Any]) -> Any:
  """`doc` with text parsed as YAML wherever the schema wants no string: Snakemake's `--config` hands over nested
  values (`seeds=[0,1]`, `train={BS: 96}`) as text. A text whose parsed value would not fit either is kept, so
  validation names it."""
  import yaml
  types = schema.get("type", [])
  types = [types] if isinstance(types, str) else types
  if isinstance(doc, str) and doc not in schema.get("enum", [doc]):  # e.g. `preflight=true` of [auto, true, false]
    try: parsed = yaml.safe_load(doc)
    except yaml.YAMLError: return doc
    return parsed if parsed in schema["enum"] else doc
  if isinstance(doc, str) and types and "string" not in types:
    try: parsed = safe_yaml(doc, "a --config value")
    except yaml.YAMLError: return doc
    return parse_text_values(parsed, schema) if _fits(parsed, types) else doc
  if isinstance(doc, dict):
    props = schema.get("properties", {})
    return {k: parse_text_values(v, props[k]) if k in props else v for k, v in doc.items()}
  if isinstance(doc, list) and isinstance(schema.get("items"), dict):
    return [parse_text_values(v, schema["items"]) for v in doc]
  return doc


def typed_config(config: dict[str, Any]) -> dict[str, Any]:
  """The workflow config with the text Snakemake's `--config` hands over (`train={TRAIN_STEPS: 100}` arrives as
  {'TRAIN_STEPS': '100'}) parsed as the schemas type it: the config's keys by schemas/config.schema.yaml, the
  `train:` overrides by schemas/platform.schema.yaml. The workflow and the audit both read a config through this,
  so the config a provenance record holds and the one the audit rebuilds agree."""
  out = parse_text_values(config, load_schema(CONFIG_SCHEMA))
  if isinstance(out.get("train"), dict):
    out["train"] = parse_text_values(out["train"], load_schema(PLATFORM_SCHEMA))
  return out


OPERATIONAL = "x-operational"  # the schema annotation of a setting that changes no output (schemas/config.schema.yaml)


def without_operational(config: Any, schema: dict[str, Any] | None = None) -> Any:
  """A copy of `config` less every setting its schema (default schemas/config.schema.yaml) marks `x-operational: true`,
  at any depth: how a run goes (space_check, the download bounds), never what it writes. The config a provenance
  record holds (plan.py provenance_config, a compared param of rule provenance) and both sides of the audit's config
  comparison go through this, so `--config space_check=false` reruns nothing and changes no verdict."""
  schema = load_schema(CONFIG_SCHEMA) if schema is None else schema
  if not isinstance(config, dict): return config
  props = schema.get("properties", {})
  return {k: without_operational(v, props[k]) if k in props else v for k, v in config.items()
          if not (k in props and props[k].get(OPERATIONAL) is True)}


def operational_keys(schema: dict[str, Any] | None = None, prefix: str = "") -> list[str]:
  """The dotted names of the settings marked `x-operational: true` (for docs and messages)."""
  schema = load_schema(CONFIG_SCHEMA) if schema is None else schema
  out = []
  for k, v in schema.get("properties", {}).items():
    name = f"{prefix}{k}"
    out += [name] if v.get(OPERATIONAL) is True else operational_keys(v, name + ".")
  return out


def _where(path) -> str:
  return ".".join(str(p) for p in path) or "(top level)"


def max_seeds() -> int:
  """The most seeds one workflow plans: `seeds`' maxItems in schemas/config.schema.yaml."""
  return load_schema(CONFIG_SCHEMA)["properties"]["seeds"]["maxItems"]


def seeds_source(configfiles: list[str | Path], cli_config: Any, base: str | Path) -> str:
  """Where the run's `seeds` come from: `--config seeds=...`, else the last --configfile with a top-level `seeds:`
  key, else the workflow's config.yaml (`base`). Read as text: a file is not parsed again."""
  import re
  if "seeds" in (cli_config or {}):
    return "--config seeds=..."
  for p in reversed(list(configfiles)):
    try:
      if re.search(r"^seeds\s*:", Path(p).read_text(encoding="utf-8", errors="replace"), re.M): return str(p)
    except OSError:
      continue
  return str(base)


def check_seed_count(seeds: Any, source: str) -> None:
  """Refuse, in one line naming `source`, more seeds than one workflow plans (max_seeds()): Snakemake plans a
  train and a provenance job per seed (one report job draws them all), so planning time grows with them (bench/bench_dryrun.py)."""
  bound = max_seeds()
  if isinstance(seeds, list) and len(seeds) > bound:
    raise UserError(f"{source}: {len(seeds):,} seeds, more than the {bound:,} one workflow plans (an MLPerf BERT "
                    f"submission needs 10 runs and each seed is a multi-hour training run on GPUs; planning time "
                    f"grows with the seeds); split the seeds over several config files, each with its own basedir, "
                    f"of at most {bound:,} seeds")


CONFIG_FIX = "Fix these keys in config.yaml, the --configfile or the --config you passed."


def validate_config(config: dict[str, Any], schema_path: str | Path, source: str = "the config",
                    fix: str = CONFIG_FIX) -> None:
  """Raise UserError listing every problem: unknown keys, wrong types, missing keys, bad values."""
  validator = _parsed_schema(Path(schema_path).read_text())[1]
  problems = []
  for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
    where = _where(err.absolute_path)
    if err.validator == "additionalProperties":
      allowed = sorted(err.schema.get("properties", {}))
      unknown = sorted(set(err.instance) - set(allowed))
      for key in unknown:
        full = f"{where}.{key}" if err.absolute_path else key
        problems.append(f"unknown key '{full}' (allowed here: {', '.join(allowed)})")
    elif err.validator == "type":
      got = _JSON_TYPES.get(type(err.instance), type(err.instance).__name__)
      want = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
      want = " or ".join(t for t in want if t != "null")  # null (unset) is never what a user means to write
      problems.append(f"key '{where}' must be of type {want}, got {got} {err.instance!r}")
    elif err.validator in ("anyOf", "oneOf") and all("required" in o for o in err.validator_value):
      choices = " or ".join(" + ".join(o["required"]) for o in err.validator_value)
      problems.append(f"key '{where}' needs {choices}")
    elif err.validator == "maxItems":  # the count, never the whole list (10,000 seeds)
      problems.append(f"key '{where}' has {len(err.instance):,} entries, more than the maximum of "
                      f"{err.validator_value:,}")
    elif err.validator == "required":
      problems.append(f"{err.message} (in '{where}')")
    else:
      problems.append(f"key '{where}': {err.message}")
  if problems:  # a value is quoted in some: never a URL's credentials
    raise UserError(f"{source} is invalid ({schema_path}):\n  - " + "\n  - ".join(map(redact, problems)) +
                    "\n" + fix)
