package vrf_test

import "github.com/containernetworking/cni/pkg/types"

type typesRoute = types.Route
