module lionet.local/reference/go_websocket_server

go 1.19

require github.com/gorilla/websocket v1.5.3
