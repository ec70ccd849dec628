SELECT * FROM place.board_bits(:board);
