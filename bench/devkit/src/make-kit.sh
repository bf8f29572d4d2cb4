#!/bin/bash
# Builds the kit's archives into .devkit/ from this (Debian 12) machine:
#   node.tar.xz    bin/node (Node 20 from /usr/bin/node, symbols stripped)
#   native.tar.xz  PostgreSQL 15 (bin subset, lib, share), redis-server, mosquitto, and every
#                  shared library they need that is not glibc itself (lib/, used through LD_LIBRARY_PATH)
#   app.tar.xz     app/ (esbuild bundles of api/src/main.ts and api/src/cli/fleet.ts, the GraphQL
#                  schema files, PGlite's wasm/data) and gen/gen.mjs (the mqtt.js generator, bundled)
# usage: bash .devkit/src/make-kit.sh PROJECT_DIR [node native app]   (default: all three archives;
#        needs xz, strip, ldd, and esbuild from the project's node_modules)
set -euo pipefail
MAIN=${1:?usage: make-kit.sh PROJECT_DIR [node native app]}
shift || true
PARTS=${*:-node native app}
want() { [[ " $PARTS " == *" $1 "* ]]; }
KITDIR=$(cd "$(dirname "$0")/.." && pwd)
STAGE=$(mktemp -d /tmp/kitstage.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
XZ_BIN=(xz -T1 --x86 --lzma2=preset=9e,dict=128MiB)
XZ_TXT=(xz -T1 --lzma2=preset=9e,dict=64MiB)

if want node; then
echo "== node"
mkdir -p "$STAGE/node/bin"
cp /usr/bin/node "$STAGE/node/bin/node"
strip "$STAGE/node/bin/node"
"$STAGE/node/bin/node" -e 'process.exit(process.versions.node.startsWith("20.") ? 0 : 1)'
fi

if want app; then
echo "== app bundle (esbuild)"
mkdir -p "$STAGE/app/app" "$STAGE/app/gen"
node "$KITDIR/src/build-app.mjs" "$MAIN" "$STAGE/app/app" "$KITDIR/src/gen.mjs" "$STAGE/app/gen"
cp -r "$MAIN/api/src/graphql/schema" "$STAGE/app/app/schema"
mkdir -p "$STAGE/app/app/api/src/graphql" && cp -r "$MAIN/api/src/graphql/schema" "$STAGE/app/app/api/src/graphql/schema"
cp "$MAIN"/node_modules/@electric-sql/pglite/dist/{pglite.wasm,pglite.data,initdb.wasm} "$STAGE/app/app/"
cp "$MAIN"/node_modules/@electric-sql/pglite/dist/{pglite.wasm,pglite.data,initdb.wasm} "$STAGE/app/app/server/"
(cd "$MAIN" && git log -1 --format='%H %cI %s') > "$STAGE/app/app/SOURCE_COMMIT"
(cd "$MAIN" && git status --short | head -50) > "$STAGE/app/app/SOURCE_STATUS"
fi

if want native; then
echo "== native: PostgreSQL 15, redis-server, mosquitto, libraries"
N="$STAGE/native"
PGB=/usr/lib/postgresql/15/bin PGL=/usr/lib/postgresql/15/lib PGS=/usr/share/postgresql/15
mkdir -p "$N/pg$PGB" "$N/pg$PGL" "$N/pg$PGS/extension" "$N/bin" "$N/lib" "$N/lib-cxx"
for b in postgres initdb pg_ctl psql pg_isready; do cp "$PGB/$b" "$N/pg$PGB/"; done
cp "$PGL"/plpgsql.so "$PGL"/dict_snowball.so "$PGL"/*_and_*.so "$PGL"/libpqwalreceiver.so "$PGL"/pgoutput.so "$PGL"/pg_stat_statements.so "$PGL"/pg_trgm.so "$N/pg$PGL/"
for f in "$PGS"/*; do case "$(basename "$f")" in man|contrib|extension) ;; *) cp -r "$f" "$N/pg$PGS/";; esac; done
cp "$PGS"/extension/plpgsql* "$PGS"/extension/pg_stat_statements* "$PGS"/extension/pg_trgm* "$N/pg$PGS/extension/"
cp "$(readlink -f /usr/bin/redis-server)" "$N/bin/redis-server"
cp /usr/sbin/mosquitto "$N/bin/mosquitto"
# every shared library of these binaries except glibc's own (the target's glibc is newer)
{
  for b in "$N/pg$PGB"/* "$N/pg$PGL"/*.so "$N/bin/redis-server" "$N/bin/mosquitto"; do ldd "$b"; done
} | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u \
  | grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64)\.so' > "$STAGE/libs.txt"
while read -r l; do cp -L "$l" "$N/lib/$(basename "$l")"; done < "$STAGE/libs.txt"
# libstdc++ and libgcc_s apart, in lib-cxx: the target's own (any newer one serves) are preferred,
# and this Debian 12 libstdc++ needs glibc 2.36; run.sh adds lib-cxx only where node cannot start
# without it (node needs exactly these two besides glibc)
mv "$N/lib/libstdc++.so.6" "$N/lib/libgcc_s.so.1" "$N/lib-cxx/"
# completeness: with lib/ on the path, nothing but glibc may come from the system
bad=0
for b in "$N/pg$PGB"/* "$N/pg$PGL"/*.so "$N/bin"/* "$N/lib"/*.so* "$N/lib-cxx"/*; do
  miss=$(LD_LIBRARY_PATH="$N/lib:$N/lib-cxx" ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3}' | grep -v -e "^$N/lib/" -e "^$N/lib-cxx/" \
    | grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64)\.so' || true)
  nf=$(LD_LIBRARY_PATH="$N/lib:$N/lib-cxx" ldd "$b" | grep 'not found' || true)
  if [ -n "$miss$nf" ]; then echo "NOT SELF-CONTAINED: $b: $miss $nf"; bad=1; fi
done
[ $bad = 0 ] || exit 1
echo "libraries: $(wc -l < "$STAGE/libs.txt") ($(du -sh "$N/lib" | cut -f1))"
fi

echo "== archives: $PARTS"
if want node; then (cd "$STAGE/node" && tar -cf - bin | "${XZ_BIN[@]}" > "$KITDIR/node.tar.xz.tmp") & fi
if want native; then (cd "$N" && tar -cf - pg bin lib lib-cxx | "${XZ_BIN[@]}" > "$KITDIR/native.tar.xz.tmp") & fi
if want app; then (cd "$STAGE/app" && tar -cf - app gen | "${XZ_TXT[@]}" > "$KITDIR/app.tar.xz.tmp") & fi
wait
for a in $PARTS; do mv "$KITDIR/$a.tar.xz.tmp" "$KITDIR/$a.tar.xz"; done
(cd "$KITDIR" && sha256sum node.tar.xz native.tar.xz app.tar.xz > SHA256SUMS)
ls -la "$KITDIR"/*.tar.xz
du -sh "$KITDIR"
