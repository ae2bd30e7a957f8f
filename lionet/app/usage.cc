// lionet/app/usage.cc: see usage.h.
#include "lionet/app/usage.h"

#include <openssl/opensslv.h>

#include <yaml-cpp/yaml.h>

#include "lionet/app/service_notify.h"

#ifndef LIONET_VERSION
#define LIONET_VERSION "unknown"
#endif

namespace lionet::app {
namespace {
struct Option {
  const char* flags;  // as shown: "-c, --config PATH"
  const char* help;  // one paragraph; '\n' starts a new line in --help
};

constexpr Option kOptions[] = {
    {"-c, --config PATH",
     "configuration directory (every *.yml/*.yaml, in name order) or file;\n"
     "default: ./conf/ if it exists, else the conf/ beside the binary's bin/,\n"
     "else /etc/lionet/ if it exists, else the conf/ of the source tree it was built from"},
    {"--check", "validate the configuration and exit (0 valid, 1 invalid)"},
    {"--print-config", "print the effective configuration (defaults filled in) and exit"},
    {"--print-reference", "print every configuration key as markdown (conf/REFERENCE.md) and exit"},
    {"--print-man", "print this manual page, lionet(8), in roff and exit"},
    {"-V, --version", "print the version and the build options and exit"},
    {"-h, --help", "print the options and exit"},
};

struct Item {
  const char* name;
  const char* text;
};

constexpr Item kSignals[] = {
    {"SIGTERM, SIGINT",
     "stop: every listener closes at once, requests in flight get app.shutdown_timeout, storage is flushed, "
     "exit 0; a second one meanwhile exits at once with status 1"},
    {"SIGHUP",
     "reload the configuration (log settings apply at once; other changes are logged as needing a restart) and "
     "reopen the log files and access logs (logrotate's postrotate sends it)"},
    {"SIGUSR2",
     "binary upgrade: start the executable at this process's path with its listening sockets; the new process "
     "takes over and this one drains and exits (no connection is refused meanwhile)"},
    {"SIGQUIT", "write a dump of every fiber to stderr and go on"},
};

constexpr Item kEnvironment[] = {
    {"LIONET_<KEY>",
     "overrides configuration key <key> (dots become '_', upper case), parsed as YAML: "
     "LIONET_FIBER_STACK_SIZE=128KiB"},
    {"NOTIFY_SOCKET, WATCHDOG_USEC",
     "set by systemd for Type=notify: READY=1, RELOADING=1, STOPPING=1, STATUS= and WATCHDOG=1 are sent there"},
    {"LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES",
     "systemd socket activation: the listening sockets passed are used instead of binding, matched to servers "
     "by name (FileDescriptorName= the server's name) or by address"},
    {"LIONET_LISTEN_FDS, LIONET_LISTEN_FDNAMES, LIONET_UPGRADE_FD",
     "set by a lionet process for the binary it starts on SIGUSR2 (not for users)"},
};

// roff: a backslash is \e; a line starting with '.' or '\'' is protected with \&; '-' is \-.
std::string roff(const std::string& s) {
  std::string out;
  bool line_start = true;
  for (char c : s) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
    line_start = c == '\n';
  }
  return out;
}

std::string one_line_yaml(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  std::string s = e.c_str();
  if (s.empty() || s == "~") s = "(none)";
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return s;
}
}  // namespace

std::string usage_text() {
  std::string out = "usage: lionet [-c <conf dir or file>] [--check] [--print-config]\n";
  for (const auto& o : kOptions) {
    std::string flags = std::string("  ") + o.flags;
    flags.resize(std::max<std::size_t>(flags.size() + 1, 22), ' ');
    std::string help = o.help;
    std::string line = flags;
    for (char c : help) {
      if (c == '\n') line += "\n" + std::string(22, ' ');
      else line += c;
    }
    out += line + "\n";
  }
  out += "Every key can be overridden by LIONET_<KEY> (dots become '_'), e.g. LIONET_FIBER_STACK_SIZE.\n";
  out += "Signals: ";
  for (std::size_t i = 0; i < std::size(kSignals); ++i) {
    if (i) out += ", ";
    std::string name = kSignals[i].name;
    out += name.substr(0, name.find(','));
  }
  out += " (see lionet(8)).\n";
  return out;
}

std::string version_text() {
  std::string out = std::string("lionet ") + LIONET_VERSION + "\n";
  out += "io backends: epoll";
#if LIONET_HAVE_URING
  out += ", io_uring";
#endif
  out += "\nfile engines: threads";
#if LIONET_HAVE_AIO
  out += ", libaio";
#endif
#if LIONET_HAVE_URING
  out += ", io_uring";
#endif
  out += std::string("\ntls: ") + OPENSSL_VERSION_TEXT + "\n";
  out += std::string("systemd: ") + systemd_support() + " (sd_notify, watchdog; socket activation is always built)\n";
#if LIONET_ASAN
  out += "sanitizer: address,undefined\n";
#elif LIONET_TSAN
  out += "sanitizer: thread\n";
#endif
  return out;
}

std::string man_page(const config::Registry& registry) {
  std::string m;
  m += ".TH LIONET 8 \"\" \"lionet " LIONET_VERSION "\" \"System Administration\"\n";
  m += ".SH NAME\nlionet \\- YAML\\-configured fiber server: HTTP/1.1 and HTTP/2, TLS, storage, syslog\n";
  m += ".SH SYNOPSIS\n.B lionet\n[\\fB\\-c\\fR \\fIconf\\fR] [\\fB\\-\\-check\\fR] [\\fB\\-\\-print\\-config\\fR]\n";
  m += ".SH DESCRIPTION\n"
       "lionet serves what its configuration lists: HTTP and HTTPS servers with static files, a storage API "
       "over a segmented append\\-only log, /metrics and /healthz, echo and syslog servers. It reads every "
       "*.yml and *.yaml file of the configuration directory in name order (later files win), then the "
       "environment overrides, and validates all of it before starting anything. Under systemd it runs as "
       "Type=notify (readiness, reload, watchdog) and takes listening sockets from a socket unit.\n";
  m += ".SH OPTIONS\n";
  for (const auto& o : kOptions) {
    std::string help = o.help;
    for (auto& c : help)
      if (c == '\n') c = ' ';
    m += ".TP\n.B " + roff(o.flags) + "\n" + roff(help) + "\n";
  }
  m += ".SH SIGNALS\n";
  for (const auto& s : kSignals) m += ".TP\n.B " + roff(s.name) + "\n" + roff(s.text) + "\n";
  m += ".SH ENVIRONMENT\n";
  for (const auto& e : kEnvironment) m += ".TP\n.B " + roff(e.name) + "\n" + roff(e.text) + "\n";
  m += ".SH FILES\n"
       ".TP\n.I /etc/lionet/\nthe configuration (server.yml, storage.yml, log.yml), every key commented\n"
       ".TP\n.I /var/lib/lionet/\nstorage data and the generated TLS certificate\n"
       ".TP\n.I /var/log/lionet/\naccess log and server log (rotated by /etc/logrotate.d/lionet)\n"
       ".TP\n.I /usr/share/lionet/www/\nthe page the shipped configuration serves\n";
  m += ".SH CONFIGURATION\nEvery key, its default and its environment variable "
       "(the same list as conf/REFERENCE.md):\n";
  for (const auto& var : registry.vars()) {
    m += ".TP\n.B " + roff(var->name()) + "\ndefault \\fB" + roff(one_line_yaml(var->default_to_yaml())) +
         "\\fR, environment \\fB" + roff(var->env_name()) + "\\fR.\n" + roff(var->description()) + "\n";
  }
  m += ".SH EXIT STATUS\n0 after a clean stop or a check that passed; 1 on an invalid configuration or a start\\-up "
       "failure (one line on stderr names the server and the cause); 2 on a bad command line.\n";
  m += ".SH SEE ALSO\n.BR systemd.service (5),\n.BR systemd.socket (5),\n.BR logrotate (8)\n";
  return m;
}
}  // namespace lionet::app
