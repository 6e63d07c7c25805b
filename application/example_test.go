package application_test

import (
	"errors"
	"fmt"

	"github.com/flotilla-gitops/flotilla/application"
	"github.com/flotilla-gitops/flotilla/fault"
)

func ExampleParse() {
	f, err := application.Parse("applications.yaml", []byte(`apiVersion: flotilla/v1
applications:
  - name: shop
    source:
      repoURL: https://git.example.com/ops/deploy.git
      path: shop
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	a := f.Applications[0]
	fmt.Println(a.Stack, a.Source.Revision, a.SyncPolicy.Interval, a.History)
	// Output: shop HEAD 3m0s 10
}

func ExampleParse_problems() {
	_, err := application.Parse("applications.yaml", []byte(`apiVersion: flotilla/v1
applications:
  - name: shop
    source:
      repoURL: https://git.example.com/ops/deploy.git
      password: hunter2
    syncPolicy: {interval: 1s}
`))
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *fault.Error
		if errors.As(e, &fe) {
			fmt.Printf("line %d: %s: %v\n", fe.Line, fe.Field, fe.Err)
		}
	}
	// Output:
	// line 6: applications[0].source.password: unknown field "password": credentials are never written inline; put the value in a file and name it with source.credentials.passwordFile
	// line 7: applications[0].syncPolicy.interval: 1s is shorter than the minimum 10s
}
