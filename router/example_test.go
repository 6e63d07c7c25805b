package router_test

import (
	"fmt"

	"github.com/flotilla-gitops/flotilla/router"
)

// A canary at one step: a tenth of the traffic to the new version.
func ExampleDynamicConfig() {
	b, err := router.DynamicConfig([]router.Route{{
		Name:        "shop_web",
		Rule:        "Host(`shop.example.com`)",
		EntryPoints: []string{"web"},
		Backends: []router.Backend{
			{Name: "stable", Weight: 90, URLs: []string{"http://shop_web:8080"}},
			{Name: "canary", Weight: 10, URLs: []string{"http://shop_web-canary:8080"}},
		},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(b))
	fmt.Println(router.MetricService("shop_web", "canary"))
	// Output:
	// {
	//   "http": {
	//     "routers": {
	//       "shop_web": {
	//         "rule": "Host(`shop.example.com`)",
	//         "entryPoints": [
	//           "web"
	//         ],
	//         "service": "shop_web"
	//       }
	//     },
	//     "services": {
	//       "shop_web": {
	//         "weighted": {
	//           "services": [
	//             {
	//               "name": "shop_web.canary",
	//               "weight": 10
	//             },
	//             {
	//               "name": "shop_web.stable",
	//               "weight": 90
	//             }
	//           ]
	//         }
	//       },
	//       "shop_web.canary": {
	//         "loadBalancer": {
	//           "servers": [
	//             {
	//               "url": "http://shop_web-canary:8080"
	//             }
	//           ]
	//         }
	//       },
	//       "shop_web.stable": {
	//         "loadBalancer": {
	//           "servers": [
	//             {
	//               "url": "http://shop_web:8080"
	//             }
	//           ]
	//         }
	//       }
	//     }
	//   }
	// }
	// shop_web.canary@http
}
