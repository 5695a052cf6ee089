module shrike.test/connect_proxy

go 1.25.0

require golang.org/x/net v0.56.0

require golang.org/x/text v0.38.0 // indirect
