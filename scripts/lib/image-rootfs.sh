#!/bin/sh
# scripts/lib/image-rootfs.sh ROOT — mmdebstrap's extract hook for scripts/image: finishes the
# root file system of the OCI image, whose packages were unpacked without maintainer scripts:
#   - /var/lib/dpkg/status names every package unpacked (its control fields, "install ok
#     installed"), so an image scanner finds their versions (scripts/image removes the rest of
#     dpkg's and apt's state after mmdebstrap's own cleanup: neither program is in the image)
#   - /etc/passwd and /etc/group: root and idem (uid and gid 10001, no shell, no home);
#     /etc/nsswitch.conf looks names up in files then DNS
#   - /etc/ld.so.cache from the host's ldconfig (libidem.so.0 lies in /usr/lib)
# The packages unpacked are apt's downloads in ROOT/var/cache/apt/archives and the .deb files
# given by path in mmdebstrap's --include (MMDEBSTRAP_INCLUDE, comma-separated).
set -eu
root=${1:?root}

status=$(mktemp)
add() {
  dpkg-deb -f "$1" | awk '{ print } /^Package:/ { print "Status: install ok installed" }' >>"$status"
  echo >>"$status"
}
for deb in "$root"/var/cache/apt/archives/*.deb; do
  [ -f "$deb" ] && add "$deb"
done
old_ifs=$IFS
IFS=,
for inc in ${MMDEBSTRAP_INCLUDE:-}; do
  case $inc in /*.deb) add "$inc" ;; esac
done
IFS=$old_ifs
cp "$status" "$root/var/lib/dpkg/status"
chmod 644 "$root/var/lib/dpkg/status"
rm -f "$status"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
idem:x:10001:10001:idem:/nonexistent:/usr/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
idem:x:10001:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
echo 'include /etc/ld.so.conf.d/*.conf' >"$root/etc/ld.so.conf"
ldconfig -r "$root"
rm -rf "$root/var/cache/ldconfig"
