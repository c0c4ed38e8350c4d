// SPDX-License-Identifier: Apache-2.0
//
// The core's one vocabulary for recoverable errors: a function that can fail in a way the
// caller must handle returns Result<T> (or Status for no value) holding either the value or
// an Error with the user-facing text. Exceptions are for the edges only: the CLI, the
// embedding API (loupe::Session throws loupe::Error subclasses of std::runtime_error), and
// the plugin ABI firewall, which turns them into status codes.
//
// libstdc++ 12 (Debian 12) has no std::expected in C++20 mode; this is its small subset.
#ifndef LOUPE_UTIL_RESULT_HPP
#define LOUPE_UTIL_RESULT_HPP

#include <string>
#include <utility>
#include <variant>

namespace loupe {

struct Error {
  std::string message;
  // The kind of failure, for a caller that maps kinds to outcomes (the session maps them to
  // its exit codes, loupe::ExitCode); 0 when only the text matters.
  int code = 0;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }
  const std::string& error() const { return std::get<1>(v_).message; }
  int code() const { return std::get<1>(v_).code; }

 private:
  std::variant<T, Error> v_;
};

// Success or an error message; the replacement of "empty string means OK".
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)  // NOLINT: implicit by design
      : error_(std::move(error.message)), code_(error.code), failed_(true) {}
  static Status Ok() { return {}; }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }
  int code() const { return code_; }

 private:
  std::string error_;
  int code_ = 0;
  bool failed_ = false;
};

inline Error make_error(std::string message, int code = 0) {
  return Error{std::move(message), code};
}

}  // namespace loupe

// Runs a step that returns Status and returns its error from the calling function when it
// fails: a sequence of steps reads as the sequence, not as its error handling.
#define LOUPE_TRY(step)                                 \
  do {                                                  \
    if (::loupe::Status st_ = (step); !st_) return st_; \
  } while (false)

#endif  // LOUPE_UTIL_RESULT_HPP
