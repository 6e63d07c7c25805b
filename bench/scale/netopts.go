package main

import (
	"github.com/moby/moby/client"
)

func networkListOptions(label string) client.NetworkListOptions {
	return client.NetworkListOptions{Filters: make(client.Filters).Add("label", label)}
}
