// SPDX-License-Identifier: Apache-2.0
#include "gzip.hpp"

#include <zlib.h>

#include "loupe/sdk/plugin.hpp"

namespace loupe::sinks {

std::string gzip_compress(std::string_view data) {
  z_stream zs{};
  // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of a zlib one.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw sdk::Error(LOUPE_ERR_RESOURCE, "pprof: zlib deflateInit2 failed");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  std::size_t written = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END)
    throw sdk::Error(LOUPE_ERR_INTERNAL, "pprof: zlib deflate did not finish");
  out.resize(written);
  return out;
}

}  // namespace loupe::sinks
