#!/usr/bin/env bash
# Installs what the dashboard's browser tests need (issue 48), without root
# and without touching /usr:
#   chromium (Debian)   unpacked from Debian's packages with its libraries
#                       into $share, started through the wrapper
#                       $bin_dir/trainyard-chromium (library path, flags for
#                       running as root in a container);
#   playwright (PyPI)   drives that chromium (executable_path); its own
#                       browser download (`playwright install`) is never used.
# Exits non-zero, saying why, when either cannot be had.
set -uo pipefail

bin_dir="$(python3 -m site --user-base 2>/dev/null)/bin"
share="${XDG_DATA_HOME:-$HOME/.local/share}/trainyard-chromium"
status=0

pip_user() {
    python3 -m pip install --user --quiet "$1" 2>/dev/null ||
        python3 -m pip install --user --quiet --break-system-packages "$1"
}

# The browser and the libraries a minimal Debian 12 lacks (found by running
# it: each is a shared library chromium or GTK opens).
PACKAGES="chromium chromium-common libdouble-conversion3 libogg0 libflac12
libharfbuzz-subset0 libminizip1 libopenh264-7 libopenjp2-7 libopus0 libasyncns0
libmp3lame0 libmpg123-0 libvorbis0a libvorbisenc2 libsndfile1 libpulse0
libxnvctrl0 libcolord2 libepoxy0 libwayland-cursor0 libwayland-egl1 libgtk-3-0
libgtk-3-common"

install_chromium() {
    command -v apt-get >/dev/null 2>&1 || { echo "chromium: apt-get not found" >&2; return 1; }
    command -v dpkg-deb >/dev/null 2>&1 || { echo "chromium: dpkg-deb not found" >&2; return 1; }
    local tmp
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2086 # the package list is words
    if ! (cd "$tmp" && apt-get download $PACKAGES >/dev/null 2>"$tmp/apt.err"); then
        echo "chromium: apt-get download failed: $(tail -n 1 "$tmp/apt.err")" >&2
        rm -rf "$tmp"
        return 1
    fi
    rm -rf "$share" && mkdir -p "$share"
    for deb in "$tmp"/*.deb; do
        dpkg-deb -x "$deb" "$share" || { echo "chromium: dpkg-deb -x $deb failed" >&2; rm -rf "$tmp"; return 1; }
    done
    rm -rf "$tmp"
    [ -x "$share/usr/lib/chromium/chromium" ] || { echo "chromium: the packages hold no usr/lib/chromium/chromium" >&2; return 1; }
    mkdir -p "$bin_dir"
    cat > "$bin_dir/trainyard-chromium" <<WRAP
#!/usr/bin/env bash
# Chromium unpacked by scripts/install-browser.sh.
lib="$share/usr/lib/x86_64-linux-gnu"
export LD_LIBRARY_PATH="\$lib:\$lib/pulseaudio:$share/usr/lib/chromium\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$share/usr/lib/chromium/chromium" --no-sandbox --disable-gpu "\$@"
WRAP
    chmod +x "$bin_dir/trainyard-chromium"
}

if [ -x "$bin_dir/trainyard-chromium" ] && "$bin_dir/trainyard-chromium" --headless=new --dump-dom about:blank 2>/dev/null | grep -q "<body>"; then
    echo "chromium: present ($bin_dir/trainyard-chromium)"
elif install_chromium && "$bin_dir/trainyard-chromium" --headless=new --dump-dom about:blank 2>/dev/null | grep -q "<body>"; then
    echo "chromium: unpacked into $share ($("$bin_dir/trainyard-chromium" --version 2>/dev/null | head -n 1))"
else
    echo "chromium: cannot be had (Debian's packages could not be downloaded, unpacked or run)" >&2
    status=1
fi

if python3 -c 'import playwright' >/dev/null 2>&1; then
    echo "playwright: present"
elif pip_user playwright && python3 -c 'import playwright' >/dev/null 2>&1; then
    echo "playwright: installed from PyPI"
else
    echo "playwright: cannot be had (pip install --user playwright failed)" >&2
    status=1
fi

exit "$status"
