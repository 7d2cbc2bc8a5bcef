#!/bin/sh
# etcd-certs.sh DIR NAME=IP [NAME=IP ...] - the TLS files of an etcd cluster
# for ocsd's replicas (docs/replicas.md "Running three replicas"): in DIR a
# CA (ca.pem; its key ca.key signs nothing else: keep it off the hosts),
# per member NAME.pem / NAME.key (subjectAltName DNS:NAME and IP:IP,
# extendedKeyUsage serverAuth AND clientAuth: the member serves clients and
# peers with it, and etcd's JSON gateway, which ocsd talks to, presents it as
# a client to the member's own gRPC port), and ocsd's client certificate
# ocsd-client.pem / ocsd-client.key (clientAuth). Keys are 0600.
# Example: etcd-certs.sh /root/etcd-tls etcd-1=10.0.0.1 etcd-2=10.0.0.2 etcd-3=10.0.0.3
set -eu
[ $# -ge 2 ] || { echo "usage: etcd-certs.sh DIR NAME=IP [NAME=IP ...]" >&2; exit 2; }
dir=$1
shift
mkdir -p "$dir"
cd "$dir"
umask 077
sign() { # sign NAME SUBJECT EXTENSIONS
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%b' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
  chmod 0644 "$1.pem"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
  -subj "/O=ocsd/CN=etcd CA" -keyout ca.key -out ca.pem \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
chmod 0644 ca.pem
for member in "$@"; do
  name=${member%%=*}
  ip=${member#*=}
  case $name in "" | *[!A-Za-z0-9._-]*) echo "etcd-certs.sh: bad member name in '$member'" >&2; exit 2 ;; esac
  [ "$ip" != "$member" ] || { echo "etcd-certs.sh: '$member' is not NAME=IP" >&2; exit 2; }
  san="DNS:$name,IP:$ip"
  [ "$ip" = 127.0.0.1 ] || san="$san,IP:127.0.0.1" # etcdctl on the member's host
  sign "$name" "/O=ocsd/CN=$name" "subjectAltName=$san\nextendedKeyUsage=serverAuth,clientAuth\n"
done
sign ocsd-client "/O=ocsd/CN=ocsd" "extendedKeyUsage=clientAuth\n"
rm -f ca.srl
echo "etcd-certs.sh: wrote $(ls "$dir" | tr '\n' ' ')in $dir"
