#!/usr/bin/env bash
# Debian's bcc for the GPU machine, which has no bcc, no kernel headers and nothing from
# the network (its kernel is this one's kind: 6.18 under Firecracker): bcc's Python
# package, libbcc and the LLVM it links, the libraries the machine may lack (used there
# only where it lacks them; libxml2 as a stub of the names LLVM binds), and the
# distribution's generic kernel headers (the stand-in setup.sh links here), trimmed to
# what bcc's programs include. Written to .whl/bcc.tar.xz (about 46 MB; the device
# carries 64 MiB in all); scripts/gpu_check.sh unpacks it where `import bcc` fails.
#
#   scripts/gpu_bcc.sh        (called by scripts/gpu_wheels.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.whl/bcc.tar.xz
hdr=$(apt-cache depends linux-headers-amd64 | sed -n 's/.*Depends: linux-headers-\(.*\)-amd64$/\1/p' | head -n 1)
[[ -n $hdr ]] || { echo "gpu_bcc.sh: no linux-headers-amd64 in apt's lists" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"  # apt's download runs as _apt
core=(libbpfcc python3-bpfcc libclang-cpp14 libllvm14 libz3-4 libbpf1)
lacking=(libelf1 libedit2 libbsd0 libmd0)
(cd "$work" && apt-get download -q "${core[@]}" "${lacking[@]}" \
    "linux-headers-$hdr-amd64" "linux-headers-$hdr-common" >/dev/null)
mkdir -p "$work/x" "$work/bcc/lib" "$work/bcc/fallback" "$work/bcc/py" "$work/bcc/kernel/include"
for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
lib=$work/x/usr/lib/x86_64-linux-gnu
cp -a "$lib"/libbcc.so.0* "$lib"/libbcc_bpf.so.0* "$lib"/libbpf.so.1* "$lib"/libz3.so.4* \
    "$lib"/libLLVM-14.so* "$work/x/usr/lib/llvm-14/lib/libclang-cpp.so.14" "$work/bcc/lib/"
for so in libelf.so.1 libedit.so.2 libbsd.so.0 libmd.so.0; do
    cp -L "$lib/$so" "$work/bcc/fallback/" 2>/dev/null || cp -L "$work/x/lib/x86_64-linux-gnu/$so" "$work/bcc/fallback/"
done
cc -shared -fPIC -O1 -Wl,-soname,libxml2.so.2 -Wl,--version-script="$root/scripts/gpu/xml_stub.map" \
    -o "$work/bcc/fallback/libxml2.so.2" "$root/scripts/gpu/xml_stub.c"
cp -a "$work/x/usr/lib/python3/dist-packages/bcc" "$work/bcc/py/"
# One tree (bcc's BCC_KERNEL_SOURCE): the common headers, then the flavour's generated ones.
src=$work/x/usr/src
for part in linux uapi asm-generic vdso trace net; do
    cp -a "$src/linux-headers-$hdr-common/include/$part" "$work/bcc/kernel/include/"
done
mkdir -p "$work/bcc/kernel/arch"
cp -a "$src/linux-headers-$hdr-common/arch/x86" "$work/bcc/kernel/arch/"
cp -a "$src/linux-headers-$hdr-amd64/include/." "$work/bcc/kernel/include/"
cp -a "$src/linux-headers-$hdr-amd64/arch/." "$work/bcc/kernel/arch/"
cp -a "$src/linux-headers-$hdr-amd64/.config" "$work/bcc/kernel/"
tar -cJf "$dest" -C "$work" bcc
ls -la "$dest"
