package imagewrite_test

import (
	"fmt"

	"github.com/flotilla-gitops/flotilla/imagewrite"
)

// Only the marked scalar's bytes change: the comment, the quoting and the
// other service stay as they were.
func ExampleApply() {
	compose := []byte(`services:
  web:
    image: "registry.example.com/shop:1.4.1" # bumped by flotilla
  db:
    image: postgres:16
`)
	f, err := imagewrite.Find(compose, []string{"services", "web", "image"})
	if err != nil {
		panic(err)
	}
	out, err := imagewrite.Apply(compose, []imagewrite.Change{{Field: f, New: "registry.example.com/shop:1.4.2"}})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// services:
	//   web:
	//     image: "registry.example.com/shop:1.4.2" # bumped by flotilla
	//   db:
	//     image: postgres:16
}
