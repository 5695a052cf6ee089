module shrike.test/connect_proxy

go 1.24
