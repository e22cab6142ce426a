#!/usr/bin/env bash
# Builds the DocC documentation of the WLStorage module with the toolchain's `docc`, without the
# swift-docc-plugin (SwiftPM cannot fetch it here):
#
#   1. builds the WLStorage target in a scratch path of its own (Docs/.build, git-ignored),
#   2. extracts the module's public symbol graph from the built module with `swift symbolgraph-extract`,
#      with the symbols of the module it re-exports (WLStorageCore: the error type),
#   3. checks that every public symbol has a `///` comment (Docs/check-doc-comments.swift),
#   4. converts Docs/WLStorage.docc with those symbols, treating every warning as an error,
#   5. does steps 1 to 3 for the two stores' modules (WLStoragePostgres, WLStorageEtcd) and converts their symbols
#      alone: docc resolves no link into another module, so a link to a public WLStorage symbol is let pass there,
#      and any other warning fails.
#
# Any docc warning (an unresolved ``Symbol`` or <doc:Article> link, a malformed directive, a doc comment
# that names a parameter that does not exist, ...) and any undocumented public symbol make the script exit
# non-zero, and so fail CI. The module and its main class share the name WLStorage, so docc words a bad link
# to a member of the class as "'WLStorage' doesn't exist at '/WLStorage/WLStorage'"; the file and line it
# prints are those of the broken link.
#
# Usage, from anywhere in the repository:
#   Docs/build.sh                          build into Docs/.build/WLStorage.doccarchive
#   DOCS_BUILD_DIR=/tmp/x Docs/build.sh    use another scratch directory
#
# Preview the result with `docc preview Docs/WLStorage.docc --additional-symbol-graph-dir
# Docs/.build/symbol-graphs`, or serve the archive with any static file server.
set -euo pipefail

cd "$(dirname "$0")/.."

module=WLStorage
catalog="Docs/$module.docc"
work="${DOCS_BUILD_DIR:-Docs/.build}"
scratch="$work/swiftpm"
graphs="$work/symbol-graphs"
archive="$work/$module.doccarchive"

step() { printf '==> %s\n' "$*" >&2; }
fail() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

command -v swift >/dev/null 2>&1 || fail "swift is not on PATH"
if command -v docc >/dev/null 2>&1; then
    docc=docc
elif docc="$(dirname "$(command -v swift)")/docc" && [ -x "$docc" ]; then
    :
else
    fail "docc is not on PATH nor beside swift"
fi
[ -d "$catalog" ] || fail "no catalog at $catalog"

step "building the $module target (scratch path $scratch)"
swift build --target "$module" --scratch-path "$scratch"
bin="$(swift build --scratch-path "$scratch" --show-bin-path)"

target="$(swiftc -print-target-info | sed -n 's/^ *"triple": "\(.*\)",*$/\1/p' | head -n 1)"
[ -n "$target" ] || fail "cannot tell the target triple from swiftc -print-target-info"

# The module imports the C module CWLStorageOpenSSL (internally), so loading it needs that module map and the
# OpenSSL headers the map's header includes.
c_flags=()
if command -v pkg-config >/dev/null 2>&1; then
    for flag in $(pkg-config --cflags-only-I libcrypto 2>/dev/null || true); do
        c_flags+=(-Xcc "$flag")
    done
fi

step "extracting the public symbol graph of $module"
rm -rf "$graphs"
mkdir -p "$graphs"
swift symbolgraph-extract \
    -module-name "$module" \
    -target "$target" \
    -I "$bin/Modules" \
    -I Sources/CWLStorageOpenSSL \
    ${c_flags[@]+"${c_flags[@]}"} \
    -minimum-access-level public \
    -skip-synthesized-members \
    -experimental-allowed-reexported-modules=WLStorageCore \
    -output-dir "$graphs"
# WLStorageError is declared in WLStorageCore, which WLStorage re-exports: its symbols are WLStorage's. Keep only this module's graphs: WLStorage.symbols.json and any WLStorage@Other.symbols.json for its
# extensions of other modules' types.
find "$graphs" -type f -name '*.symbols.json' ! -name "$module.symbols.json" ! -name "$module@*.symbols.json" \
    -delete
[ -s "$graphs/$module.symbols.json" ] || fail "no symbol graph was extracted for $module"

step "checking that every public symbol has a doc comment"
swift Docs/check-doc-comments.swift "$graphs" || fail "document every public symbol with a /// comment"

step "converting $catalog"
rm -rf "$archive"
log="$work/docc.log"
status=0
"$docc" convert "$catalog" \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name "$module" \
    --fallback-bundle-identifier wlstorage \
    --output-path "$archive" \
    --warnings-as-errors \
    2>&1 | tee "$log" || status=$?
# Belt and braces: a warning that docc printed but did not count as an error still fails the build.
if [ "$status" -ne 0 ] || grep -Eq '(^|[^a-z])(warning|error):' "$log"; then
    fail "docc reported problems (see above); the documentation must build without warnings"
fi
[ -d "$archive" ] || fail "docc wrote no archive"

# The stores: their doc comments, and their links to symbols of their own module.
wlstorage_symbols="$(grep -o '"pathComponents":\["[A-Za-z]*"\]' "$graphs/$module.symbols.json" | cut -d'"' -f4)"
for store in WLStoragePostgres WLStorageEtcd; do
    step "building the $store target"
    swift build --target "$store" --scratch-path "$scratch"
    store_graphs="$work/symbol-graphs-$store"
    rm -rf "$store_graphs"
    mkdir -p "$store_graphs"
    store_flags=()
    for flag in $(pkg-config --cflags-only-I libcrypto libpq libcurl 2>/dev/null || true); do
        store_flags+=(-Xcc "$flag")
    done
    step "extracting the public symbol graph of $store"
    swift symbolgraph-extract -module-name "$store" -target "$target" -I "$bin/Modules" \
        -I Sources/CWLStorageOpenSSL -I Sources/CWLStorageLibPQ -I Sources/CWLStorageCurl \
        ${store_flags[@]+"${store_flags[@]}"} -minimum-access-level public -skip-synthesized-members \
        -output-dir "$store_graphs"
    find "$store_graphs" -type f -name '*.symbols.json' ! -name "$store.symbols.json" -delete
    [ -s "$store_graphs/$store.symbols.json" ] || fail "no symbol graph was extracted for $store"
    swift Docs/check-doc-comments.swift "$store_graphs" || fail "document every public symbol of $store"
    step "converting the symbols of $store"
    store_log="$work/docc-$store.log"
    "$docc" convert --additional-symbol-graph-dir "$store_graphs" --fallback-display-name "$store" \
        --fallback-bundle-identifier "$store" --output-path "$work/$store.doccarchive" >"$store_log" 2>&1 || true
    problems="$(grep -E '^(warning|error):' "$store_log" | while IFS= read -r line; do
        name="$(printf '%s' "$line" | sed -n "s/^[a-z]*: '\([A-Za-z]*\)' doesn't exist at .*/\1/p")"
        if [ -n "$name" ] && printf '%s\n' "$wlstorage_symbols" | grep -qx "$name"; then continue; fi
        printf '%s\n' "$line"
    done)"
    [ -z "$problems" ] || fail "docc reported problems in $store's doc comments:
$problems"
done

step "documentation built: $archive"
