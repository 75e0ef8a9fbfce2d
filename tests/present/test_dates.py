"""Date-looking strings: any plausible calendar date or time is found, numbers and words that only resemble one
are not."""

import pytest

from pmrag.present.dates import looks_like_date


@pytest.mark.parametrize("value", [
    "2024-04-10T21:05", "2024 04 10", "1999.12.31", "29/2/2024", "2/29", "Sept. 3rd", "3 sept", "dec9",
    "2024년 4월", "四月十日", "平成元年", "9 : 30", "04/2024", "2024_4", "10-4-24", "12311999",
])
def test_plausible_dates_and_times_are_found(value):
    assert looks_like_date(value)


@pytest.mark.parametrize("value", [
    "0.2024", "2024", "240410", "April", "May", "mayor", "march", "decision 10", "2/30", "13/45", "32/1",
    "2100-01-01", "1899-12-31", "20241310", "1.2.10", "v1.2.3", "Top 5 10 20", "Top-10", "1,183", "17.6%",
    "[0.048, 0.184]", "-0.0375", "Best − diagnostic hybrid (summary_bm25+summary_vector@0.50)", "4月",
])
def test_numbers_and_words_that_only_resemble_a_date_are_not(value):
    assert not looks_like_date(value)
