#!/usr/bin/env bash
# Build ffcv from the kit that `make wheelhouse` writes (.ci/wheelhouse.py), with no network and no root:
# Debian 12's OpenCV core/imgproc and libturbojpeg are unpacked into LIBDIR (never into /), and _libffcv is linked
# with LIBDIR on its run path, so it finds them there at import time and the system is left alone.
# Usage: bash .ci/build_ffcv.sh KIT PYTHON LIBDIR   (make setup WHEELS=DIR calls it with DIR/ffcv-kit)
set -euo pipefail
KIT=$1 PY=$2 LIBS=$3
ARCH=x86_64-linux-gnu
say() { printf '[build-ffcv] %s\n' "$*"; }
command -v dpkg-deb >/dev/null || { say "ERROR: dpkg-deb is missing: it unpacks the kit's .deb files"; exit 1; }
command -v g++ >/dev/null || { say "ERROR: no C++ compiler (g++): apt-get install g++ where you can"; exit 1; }
SDIST=$(ls "$KIT"/ffcv-*.tar.gz 2>/dev/null | head -1)
[ -n "$SDIST" ] || { say "ERROR: $KIT holds no ffcv-*.tar.gz: write the kit again with make wheelhouse"; exit 1; }

rm -rf "$LIBS" && mkdir -p "$LIBS/bin" "$LIBS/pkgconfig"
for deb in "$KIT"/debs/*.deb; do dpkg-deb -x "$deb" "$LIBS"; done
LIB=$LIBS/usr/lib/$ARCH
# opencv.hpp includes the header of every module that opencv_modules.hpp names: the kit has two
cat > "$LIBS/usr/include/opencv4/opencv2/opencv_modules.hpp" <<'EOF'
#ifndef OPENCV_MODULES_HPP
#define OPENCV_MODULES_HPP
#define HAVE_OPENCV_CORE
#define HAVE_OPENCV_IMGPROC
#endif
EOF
cat > "$LIBS/pkgconfig/opencv4.pc" <<EOF
Name: opencv4
Description: OpenCV core and imgproc from the ffcv kit
Version: 4.6.0
Cflags: -I$LIBS/usr/include/opencv4 -I$LIBS/usr/include/$ARCH/opencv4
Libs: -L$LIB -lopencv_imgproc -lopencv_core
EOF
cat > "$LIBS/pkgconfig/libturbojpeg.pc" <<EOF
Name: libturbojpeg
Description: libjpeg-turbo's TurboJPEG API from the ffcv kit
Version: 2.1
Cflags: -I$LIBS/usr/include
Libs: -L$LIB -lturbojpeg
EOF
# ffcv's setup.py asks `pkg-config --cflags --libs NAME` for these two and nothing else: this answers from the kit
# (never from the system's opencv4.pc, and where no pkg-config is installed)
cat > "$LIBS/bin/pkg-config" <<'EOF'
#!/bin/sh
for name; do :; done
pc="$(dirname "$0")/../pkgconfig/$name.pc"
[ -f "$pc" ] || { echo "Package $name was not found in the ffcv kit"; exit 1; }
sed -n 's/^Cflags: //p; s/^Libs: //p' "$pc" | tr '\n' ' '; echo
EOF
chmod +x "$LIBS/bin/pkg-config"

say "building $(basename "$SDIST") against the kit's libraries in $LIBS"
# DT_RPATH, not RUNPATH: the loader also searches it for the kit's libraries' own dependencies (libtbb, liblapack)
# (Debian keeps liblapack and libblas in subfolders that its alternatives link from; here nothing links them)
PATH="$LIBS/bin:$PATH" LDFLAGS="-Wl,--disable-new-dtags,-rpath,$LIB:$LIB/lapack:$LIB/blas" \
  "$PY" -m pip install -q --no-index --no-deps --no-build-isolation "$SDIST"
EXT=$("$PY" -c 'import glob, sysconfig; print(*glob.glob(sysconfig.get_paths()["platlib"] + "/ffcv/_libffcv*.so"))')
if ldd "$EXT" | grep -q "not found"; then say "ERROR: $EXT links what the kit lacks:"; ldd "$EXT" | grep "not found"; exit 1; fi
# what the machine itself must provide: the C and C++ runtimes and zlib, nothing more
OUTSIDE=$(ldd "$EXT" | awk '/=>/ {print $1}' | grep -v -E '^(libc|libm|libstdc\+\+|libgcc_s|libz|libpthread|libdl)\.so' \
  | while read -r lib; do ldd "$EXT" | grep -F "$lib =>" | grep -qF "$LIBS" || echo "$lib"; done | tr '\n' ' ')
say "done: $EXT links $(ldd "$EXT" | grep -c "$LIBS") libraries from the kit${OUTSIDE:+; from the system: $OUTSIDE}"
