#!/bin/sh
# Makes what `inorder serve --topology sni` (or `inorder dev --topology sni`)
# needs to be tried on one machine, in the directory given (default
# ./sni-local):
#
#   ca.crt               a throwaway CA, valid for 2 days, for clients to verify with
#   proxy.crt, proxy.key a certificate for *.$SNI_DOMAIN, signed by it, for --tls-cert and --tls-key
#   hosts                one /etc/hosts line: bootstrap.$SNI_DOMAIN and broker-0 ..
#                        broker-$((SNI_BROKERS-1)).$SNI_DOMAIN on 127.0.0.1
#
# SNI_DOMAIN defaults to kafka.test (.test is reserved and never in DNS,
# RFC 6761), SNI_BROKERS to 10. The CA's key is deleted once it has signed:
# nothing else can be signed with it. Needs openssl.
set -eu
dir=${1:-sni-local}
domain=${SNI_DOMAIN:-kafka.test}
brokers=${SNI_BROKERS:-10}
command -v openssl >/dev/null || { echo "sni-local.sh: needs openssl" >&2; exit 1; }
mkdir -p "$dir"
cd "$dir"
umask 077
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj "/CN=inorder sni-local CA" -days 2 -out ca.crt \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout proxy.key -subj "/CN=*.$domain" -out proxy.csr 2>/dev/null
printf 'subjectAltName=DNS:*.%s\nextendedKeyUsage=serverAuth\n' "$domain" >proxy.ext
openssl x509 -req -in proxy.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile proxy.ext -out proxy.crt 2>/dev/null
rm -f ca.key ca.srl proxy.csr proxy.ext
chmod 644 ca.crt proxy.crt
{
  printf '127.0.0.1 bootstrap.%s' "$domain"
  i=0
  while [ "$i" -lt "$brokers" ]; do printf ' broker-%d.%s' "$i" "$domain"; i=$((i + 1)); done
  echo
} >hosts
chmod 644 hosts
echo "sni-local.sh: wrote $dir/ca.crt, $dir/proxy.crt, $dir/proxy.key (*.$domain) and $dir/hosts"
