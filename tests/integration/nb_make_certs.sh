#!/usr/bin/env bash
# nb_make_certs.sh DIR - test certificates for the northbound tests, made
# fresh with openssl at test time (nothing secret is kept in git):
#   ca.pem            the CA both sides trust
#   server.pem/.key   the server, valid for 127.0.0.1, ::1 and localhost
#   scheduler, operator, viewer .pem/.key   clients whose subject OU is the role
#   norole.pem/.key   a client of the right CA whose OU names no role
#   tworoles.pem/.key a client with two role OUs (ambiguous: no role)
#   rogue.pem/.key    an operator client signed by a CA the server does not trust
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }

make_ca() { # name subject
  key "$1"
  openssl req -x509 -new -key "$1.key" -subj "$2" -days 2 -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() { # name subject ca ext
  key "$1"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

make_ca ca "/O=ocsd-test/CN=ocsd test CA"
make_ca rogue-ca "/O=elsewhere/CN=rogue CA"
leaf server "/O=ocsd-test/CN=ocsd" ca \
  "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage=serverAuth"
client_ext="extendedKeyUsage=clientAuth"
leaf scheduler "/O=ocsd-test/OU=scheduler/CN=slurm" ca "$client_ext"
leaf operator "/O=ocsd-test/OU=operator/CN=alice" ca "$client_ext"
leaf viewer "/O=ocsd-test/OU=viewer/CN=grafana" ca "$client_ext"
leaf norole "/O=ocsd-test/OU=ops-team/CN=bob" ca "$client_ext"
leaf tworoles "/O=ocsd-test/OU=viewer/OU=operator/CN=eve" ca "$client_ext"
leaf rogue "/O=elsewhere/OU=operator/CN=mallory" rogue-ca "$client_ext"
