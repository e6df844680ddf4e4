# 1. Download: every MLPerf artifact from its configured source (mlcommons-r2:<.uri URL or mirror directory>,
#    gdrive:<id>, URL or local path), md5-checked, resumed after a failure. An R2 dataset's md5 list is fetched
#    once (checkpoint r2_listing, cached under download/r2/); each file is then its own job. Network errors are
#    retried inside the job with backoff; no `retries:` here, so a deterministic failure (md5 mismatch, missing
#    path, HTTP 403) fails once.
import functools, hashlib, os, re

from mlperf_bert.data import r2 as _r2


def _r2_datasets():
    """{dataset name: source} of every R2 dataset the config names (no network: the name is in the URL)."""
    out = {}
    for s in config["sources"].values():
        if _r2.is_r2(s["url"]):
            out.setdefault(_r2.dataset_name(s["url"], root=REPO), s["url"])
    return out


try:
    R2_DATASETS = _r2_datasets()
    TEXT_DATASET = _r2.dataset_name(config["sources"]["results4"]["url"], root=REPO) if TEXT_FROM_R2 else None
except UserError as e:
    raise WorkflowError(str(e))
# with results4 (the text extracted) the tarball and its manifest are not downloaded (a demo config merged under
# this one may still name them)
FILE_SOURCES = {k: v for k, v in config["sources"].items()
                if k != "results4" and not (TEXT_FROM_R2 and k in (MANIFEST, "results_text.tar.gz"))}


def _listing(source):
    """The cached md5 list and .uri of the R2 dataset a source names (empty for other sources). ancient(): listing
    the dataset again reruns only the files whose md5 changed (their params, below), not every download."""
    if not _r2.is_r2(source):
        return {}
    name = _r2.dataset_name(source, root=REPO)
    return {"listing": ancient(B(f"download/r2/{name}.md5")), "uri": ancient(B(f"download/r2/{name}.uri"))}


@functools.lru_cache(maxsize=None)
def _read_listing(path, mtime_ns):
    listing = _r2.read_listing(path)
    return listing, {n: listing[rel] for n, rel in _text_names(listing).items()}


def _text_names(listing):
    try:
        return _r2.text_entries(listing, "?")
    except UserError:
        return {}


def _listed(dataset):
    """(listing, {text name: md5}) of a cached dataset list, or (None, None) before it is fetched."""
    p = B(f"download/r2/{dataset}.md5")
    try:
        return _read_listing(p, os.stat(p).st_mtime_ns)
    except (OSError, UserError):
        return None, None


def _listed_md5(file):
    """The md5 the dataset's list gives for a download of an R2 source (None for other sources, or not yet listed)."""
    s = FILE_SOURCES[file]
    if not _r2.is_r2(s["url"]):
        return None
    listing, _ = _listed(_r2.dataset_name(s["url"], root=REPO))
    try:
        return listing[_r2.find_entry(listing, s.get("path") or file, "?")] if listing else None
    except UserError:
        return None


def _one_of(names):
    return "|".join(re.escape(n) for n in names) or "(?!)"


rule download:
    input:
        unpack(lambda w: _listing(FILE_SOURCES[w.file]["url"])),
    output:
        file=B("download/{file}"),
        sha256=B("download/{file}.sha256"),
    params:
        url=lambda w: FILE_SOURCES[w.file]["url"],
        md5=lambda w: FILE_SOURCES[w.file]["md5"],
        path=lambda w: FILE_SOURCES[w.file].get("path"),
        listed_md5=lambda w: _listed_md5(w.file),
    wildcard_constraints:
        file=_one_of(FILE_SOURCES),
    log:
        B("logs/download/{file}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=300,
    script:
        "../workflow/scripts/download.py"


checkpoint r2_listing:
    output:
        listing=B("download/r2/{dataset}.md5"),
        uri=B("download/r2/{dataset}.uri"),
    params:
        source=lambda w: R2_DATASETS[w.dataset],
    wildcard_constraints:
        dataset=_one_of(R2_DATASETS),
    log:
        B("logs/download/r2_{dataset}.log"),
    conda:
        "../envs/data.yaml"
    resources:
        mem_mb=200,
    script:
        "../workflow/scripts/r2_listing.py"


if TEXT_FROM_R2:

    # The dataset holds the text already extracted: each part is its own download into results4/ (no extract
    # step), and the manifest the verify rules read is written from the dataset's md5 list.
    rule r2_text:
        input:
            listing=ancient(B(f"download/r2/{TEXT_DATASET}.md5")),
            uri=ancient(B(f"download/r2/{TEXT_DATASET}.uri")),
        output:
            B("results4/{name}"),
        params:
            dataset=TEXT_DATASET,
            md5=lambda w: (_listed(TEXT_DATASET)[1] or {}).get(w.name),
        wildcard_constraints:
            name=r"part-\d{5}-of-\d{5}|eval\.txt",
        log:
            B("logs/download/results4_{name}.log"),
        conda:
            "../envs/data.yaml"
        resources:
            mem_mb=300,
        script:
            "../workflow/scripts/r2_text.py"

    rule r2_manifest:
        input:
            listing=ancient(B(f"download/r2/{TEXT_DATASET}.md5")),
        output:
            B("download", MANIFEST),
        params:
            dataset=TEXT_DATASET,
            # rewritten (and the topics re-verified) only when the text's md5s change, not when the list is re-fetched
            digest=lambda w: hashlib.md5(repr(sorted((_listed(TEXT_DATASET)[1] or {}).items())).encode()).hexdigest(),
        log:
            B("logs/download/r2_manifest.log"),
        conda:
            "../envs/data.yaml"
        resources:
            mem_mb=200,
        script:
            "../workflow/scripts/r2_manifest.py"
