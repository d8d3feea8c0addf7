"""The injection library reads CUPTI's records through CUDA 12's structures (the headers
it is built with); CUPTI hands back the newest of its own version's. The fields read
(kind, start, end, name, copyKind) must sit where every CUPTI on this machine puts them:
pip's CUDA 12 and CUDA 13 (the test extra) and any toolkit under /usr/local."""

from __future__ import annotations

import glob
import importlib.util
import re
import subprocess
from pathlib import Path

from tests.support.cuda_fake import header_dirs

INJECT = (
    Path(__file__).resolve().parents[5] / "src/adaptyst_top/collectors/probes/kinds/cuda_inject.c"
)
# Each record kind read, its fields read, and the kind's name in CUPTI's enum.
READ = {
    "CONCURRENT_KERNEL": ("kind", "start", "end", "name"),
    "MEMCPY": ("kind", "copyKind", "start", "end"),
    "MEMSET": ("kind", "start", "end"),
}
STRUCT_OF = {"CONCURRENT_KERNEL": "Kernel", "MEMCPY": "Memcpy", "MEMSET": "Memset"}


def cupti_includes() -> list[Path]:
    """Every CUPTI header folder here: pip's CUDA 12 and 13, toolkits under /usr/local."""
    found = []
    for package in ("nvidia.cuda_cupti", "nvidia.cu13"):
        spec = importlib.util.find_spec(package)
        for place in spec.submodule_search_locations or [] if spec else []:
            found += [p for p in Path(place).glob("*include") if (p / "cupti_activity.h").exists()]
    found += [Path(p).parent for p in glob.glob("/usr/local/cuda*/include/cupti_activity.h")]
    found += [
        Path(p).parent for p in glob.glob("/usr/local/cuda*/extras/CUPTI/include/cupti_activity.h")
    ]
    return sorted({p.resolve() for p in found})


def records_of(include: Path) -> dict[str, str]:
    """The structure CUPTI's header names as each kind's record."""
    text = (include / "cupti_activity.h").read_text()
    out = {}
    for kind in READ:
        m = re.search(
            r"record[\s*]+structure[\s*]+is[\s*]+\\ref[\s*]+(CUpti_Activity\w+)\.?[\s*]*/\s*"
            rf"CUPTI_ACTIVITY_KIND_{kind}\s*=",
            text,
        )
        assert m, f"{include}: no record structure named for {kind}"
        out[kind] = m.group(1)
    return out


def offsets(include: Path, structs: dict[str, str], tmp: Path) -> dict[str, list[int]]:
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        "#include <cupti_activity.h>",
        "int main(void) {",
    ]
    for kind, fields in READ.items():
        offs = ", ".join(f"offsetof({structs[kind]}, {f})" for f in fields)
        lines.append(f'printf("{kind}' + " %zu" * len(fields) + f'\\n", {offs});')
    lines.append("return 0; }")
    src, exe = tmp / "off.c", tmp / "off"
    src.write_text("\n".join(lines))
    extra = [f"-I{d}" for d in header_dirs()[1:]]  # cuda.h and host_defines.h (CUDA 12's)
    subprocess.run(["gcc", f"-I{include}", *extra, "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: [int(x) for x in line.split()[1:]] for line in out.splitlines()}


def test_the_fields_read_sit_where_every_cupti_here_writes_them(tmp_path: Path) -> None:
    source = INJECT.read_text()
    built_with = {
        k: f"CUpti_Activity{m}"
        for k, m in (
            (kind, re.search(rf"CUpti_Activity({STRUCT_OF[kind]}\d+)", source).group(1))  # type: ignore[union-attr]
            for kind in READ
        )
    }
    read = offsets(header_dirs()[0], built_with, tmp_path)
    includes = cupti_includes()
    majors = {
        re.search(
            r"#define\s+CUPTI_API_VERSION\s+(\d+)", (i / "cupti_version.h").read_text()
        ).group(1)  # type: ignore[union-attr]
        for i in includes
    }
    assert len(includes) >= 2 and len(majors) >= 2, "the test extra holds CUDA 12's and 13's"
    for include in includes:
        structs = records_of(include)
        assert offsets(include, structs, tmp_path) == read, (include, structs)
