#!/bin/sh
# Build-time vendoring of xterm.js into static files (never a CDN). Reproducible: `npm ci` installs
# exactly package-lock.json (versions + sha512 integrity; it fails on any mismatch) and runs no
# install scripts. Output: <static>/vendor/xterm/{xterm.js,xterm.css,addon-fit.js,LICENSE*}.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/xterm}
cd "$here"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
mkdir -p "$out"
install -m 644 node_modules/@xterm/xterm/lib/xterm.js      "$out/xterm.js"
install -m 644 node_modules/@xterm/xterm/css/xterm.css     "$out/xterm.css"
install -m 644 node_modules/@xterm/addon-fit/lib/addon-fit.js "$out/addon-fit.js"
install -m 644 node_modules/@xterm/xterm/LICENSE           "$out/LICENSE.xterm"
install -m 644 node_modules/@xterm/addon-fit/LICENSE       "$out/LICENSE.addon-fit"
# The source maps reference ../src which is not shipped: strip the trailing comment so browsers
# do not ask for a missing .map (404 noise).
sed -i '$ s|^//# sourceMappingURL=.*$||' "$out/xterm.js" "$out/addon-fit.js"
(cd "$out" && sha256sum xterm.js xterm.css addon-fit.js > SHA256SUMS)
