# binaries.sh: sourced by the scripts that check an install, the node image
# or a release (scripts/lane.sh, scripts/frontdoor.sh): which binary of the
# suite holds each plugin, read from the built binaries themselves.

# suite_binaries DIR: cniforge and its companions (`cniforge version`).
suite_binaries() {
	echo cniforge $("$1/cniforge" version | sed -n 's/^companions: //p')
}

# holders DIR: "PLUGIN BINARY" per plugin of the suite, sorted, as
# `cniforge install` links them: a companion's plugins (its `version`) to
# it, every other plugin of `cniforge version` to cniforge. It fails, saying
# so on stderr, when a binary cannot tell its plugins or none are listed: a
# caller reading `< <(holders DIR)` would otherwise check nothing.
holders() {
	local dir=$1 c p v cv
	local -A h=()
	v=$("$dir/cniforge" version) || {
		echo "holders: $dir/cniforge version failed" >&2
		return 1
	}
	for p in $(sed -n 's/^plugins: //p' <<<"$v"); do
		h[$p]=cniforge
	done
	for c in $(sed -n 's/^companions: //p' <<<"$v"); do
		cv=$("$dir/$c" version) || {
			echo "holders: $dir/$c version failed" >&2
			return 1
		}
		for p in $(sed -n 's/^plugins: //p' <<<"$cv"); do
			h[$p]=$c
		done
	done
	[ ${#h[@]} -gt 0 ] || {
		echo "holders: $dir/cniforge version lists no plugins" >&2
		return 1
	}
	for p in "${!h[@]}"; do
		echo "$p ${h[$p]}"
	done | sort
}
