module lionet.local/reference/go_static_server

go 1.19
