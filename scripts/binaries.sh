# binaries.sh: sourced by the scripts that check an install, the node image
# or a release (scripts/lane.sh, scripts/frontdoor.sh): which binary of the
# suite holds each plugin, read from the built binaries themselves.

# suite_binaries DIR: cniforge and its companions (`cniforge version`).
suite_binaries() {
	echo cniforge $("$1/cniforge" version | sed -n 's/^companions: //p')
}

# holders DIR: "PLUGIN BINARY" per plugin of the suite, sorted, as
# `cniforge install` links them: a companion's plugins (its `version`) to
# it, every other plugin of `cniforge version` to cniforge.
holders() {
	local dir=$1 c p
	local -A h=()
	for p in $("$dir/cniforge" version | sed -n 's/^plugins: //p'); do
		h[$p]=cniforge
	done
	for c in $("$dir/cniforge" version | sed -n 's/^companions: //p'); do
		for p in $("$dir/$c" version | sed -n 's/^plugins: //p'); do
			h[$p]=$c
		done
	done
	for p in "${!h[@]}"; do
		echo "$p ${h[$p]}"
	done | sort
}
