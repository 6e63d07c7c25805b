package main

import (
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

func networkListOptions(label string) network.ListOptions {
	return network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", label))}
}
