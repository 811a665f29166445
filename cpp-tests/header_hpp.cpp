// syrah.hpp compiles on its own as C++17 under -pedantic -Werror.
#include <syrah.hpp>

int main() {
  syrah::range<2> r(4, 5);
  return r.size() == 20 && syrah_api_version() == SYRAH_VERSION ? 0 : 1;
}
