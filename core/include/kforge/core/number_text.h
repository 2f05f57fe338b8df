// Numbers as the text of messages, reports and dataset cards: printf's "%g"
// with a given count of significant digits, or "%f" with a given count of
// decimals. The one copy every module uses, so a figure reads the same in a
// judge's verdict, a filter's rejection and a card: verdict texts and the
// card files are compared byte for byte by their tests.
#pragma once

#include <string>

namespace kforge {

// printf("%.<digits>g"): 0.000123456 -> "0.000123" (3 digits), 1234567 -> "1.23e+06".
std::string format_significant(double value, int digits = 3);

// printf("%.<decimals>f"): 12.345 -> "12.3" (1 decimal), 99.5 -> "100" (0 decimals).
std::string format_fixed(double value, int decimals);

}  // namespace kforge
