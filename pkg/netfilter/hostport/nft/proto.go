package nft

// protoNum is the IP protocol number of a mapping's protocol (0 for
// another name). A switch, not a map: nothing to build at init.
func protoNum(proto string) byte {
	switch proto {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "sctp":
		return 132
	}
	return 0
}
