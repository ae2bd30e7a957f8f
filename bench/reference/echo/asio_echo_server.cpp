// asio_echo_server - Boost.Asio in LioNet's echo comparisons.
//
// What it stands for: the common C++ callback (proactor) style on one thread: a single
// io_context run by main(), async_read_some into a 64 KiB buffer per connection, async_write of
// what was read, TCP_NODELAY. It shows what a mainstream C++ async library costs beside
// LioNet's fibers and the raw epoll reference.
//
// Usage: asio_echo_server PORT   (binds 127.0.0.1; default port 9002; runs until killed)
#include <boost/asio.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace net = boost::asio;
using net::ip::tcp;

namespace {

// One accepted socket. Each pending operation's handler holds a shared_ptr to it, so it lives
// exactly as long as an operation is outstanding.
struct Connection : std::enable_shared_from_this<Connection> {
    explicit Connection(tcp::socket s) : socket(std::move(s)), data(64 * 1024) {}

    void read_more() {
        socket.async_read_some(net::buffer(data),
                               [keep = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                   if (!ec) keep->write_back(n);
                               });
    }

    void write_back(std::size_t n) {
        net::async_write(socket, net::buffer(data.data(), n),
                         [keep = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                             if (!ec) keep->read_more();
                         });
    }

    tcp::socket socket;
    std::vector<char> data;
};

void accept_next(tcp::acceptor& acceptor) {
    acceptor.async_accept([&acceptor](const boost::system::error_code& ec, tcp::socket s) {
        if (!ec) {
            boost::system::error_code ignored;
            s.set_option(tcp::no_delay(true), ignored);
            std::make_shared<Connection>(std::move(s))->read_more();
        }
        accept_next(acceptor);
    });
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 2) {
        std::fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    const auto port = static_cast<unsigned short>(argc == 2 ? std::atoi(argv[1]) : 9002);
    try {
        net::io_context io(1);  // concurrency hint 1: one thread runs everything
        tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), port));
        accept_next(acceptor);
        std::fprintf(stderr, "asio_echo_server: 127.0.0.1:%u\n", static_cast<unsigned>(port));
        io.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "asio_echo_server: %s\n", e.what());
        return 1;
    }
    return 0;
}
