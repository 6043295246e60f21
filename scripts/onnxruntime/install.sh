#!/usr/bin/env bash
# ONNX Runtime for the ONNX export's tests: npm's onnxruntime-node at the
# version package-lock.json (beside this script) pins, installed by npm ci
# with ONNXRUNTIME_NODE_INSTALL=skip (its postinstall would fetch CUDA
# binaries; the CPU binaries ship in the package).
#
#   bash scripts/onnxruntime/install.sh DIR          (make deps: build/onnxruntime)
#   bash scripts/onnxruntime/install.sh remove DIR   (make clean)
#
# Where DIR holds an install of this lock, install does nothing. Otherwise
# npm ci runs in a new folder beside DIR, which is renamed to DIR once
# complete; DIR may then hold an earlier install of this script's (a
# package.json named orthonet-onnxruntime, its lock and node_modules, nothing
# else), which that replaces. Anything else in DIR stops it (exit 1), DIR as
# it was; a failed npm ci leaves DIR as it was too. remove removes DIR only
# where it holds such an install alone, and says so otherwise.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage="usage: install.sh [remove] DIR"
mode=install
if [[ ${1:-} == remove ]]; then
	mode=remove
	shift
fi
dir=${1:?$usage}
[[ $# == 1 ]] || { echo "$usage" >&2; exit 2; }

# foreign DIR prints what in DIR is not an install of this script's, or
# nothing (DIR absent, empty, or such an install alone).
foreign() {
	[[ -e $1 || -L $1 ]] || return 0
	if [[ -L $1 || ! -d $1 ]]; then
		echo "$1 is not a folder"
		return
	fi
	local f any=""
	for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
		[[ -e $f || -L $f ]] || continue
		any=1
		case ${f##*/} in package.json | package-lock.json | node_modules) ;; *)
			echo "$1 holds ${f##*/}"
			return
			;;
		esac
	done
	[[ -z $any ]] || grep -qE '"name": *"orthonet-onnxruntime"' "$1/package.json" 2>/dev/null ||
		echo "$1 holds no package.json of orthonet-onnxruntime"
}

refuse() {
	local bad
	bad=$(foreign "$dir")
	[[ -z $bad ]] && return
	echo "deps: $bad, not an install of make deps' ONNX Runtime: $1" >&2
	exit 1
}

if [[ $mode == remove ]]; then
	[[ -e $dir ]] || exit 0
	bad=$(foreign "$dir")
	if [[ -n $bad ]]; then
		echo "clean: $bad, not make deps' ONNX Runtime alone: $dir left as it is" >&2
		exit 0
	fi
	rm -rf "$dir"
	echo "clean: removed $dir (make deps' ONNX Runtime)"
	exit 0
fi

if [[ -e $dir/node_modules/onnxruntime-node/package.json ]] && cmp -s "$here/package-lock.json" "$dir/package-lock.json"; then
	echo "deps: ONNX Runtime found in $dir"
	exit 0
fi
refuse "move it, or remove it (deps replaces only its own install)"
echo "deps: installing ONNX Runtime (npm's onnxruntime-node) into $dir"
mkdir -p "$(dirname "$dir")"
new=$(mktemp -d "$dir.new.XXXXXX")
old=""
trap 'rm -rf "$new" ${old:+"$old"}' EXIT
cp "$here/package.json" "$here/package-lock.json" "$new/"
(cd "$new" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error >/dev/null)
[[ -e $new/node_modules/onnxruntime-node/package.json ]] || {
	echo "deps: npm ci did not install onnxruntime-node; $dir left as it is" >&2
	exit 1
}
chmod 755 "$new"
refuse "it appeared while npm ran; move it (deps replaces only its own install)"
if [[ -e $dir ]]; then
	old=$(mktemp -d "$dir.old.XXXXXX")
	mv "$dir" "$old/"
fi
# -T: never into a folder that appeared meanwhile; an empty one is replaced,
# one that holds anything fails the rename.
mv -T "$new" "$dir"
