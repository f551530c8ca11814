! An unmodified Fortran 77 MPI program (include 'mpif.h'): MPI_ALLGATHER out of
! place and with MPI_IN_PLACE, MPI_ALLGATHERV with zero counts and reversed
! displacements, MPI_IALLGATHER + MPI_WAIT, a strided MPI_TYPE_VECTOR send, and
! MPI_ERRORS_RETURN with a negative count. Aborts on a wrong value.
      program agxf77
      implicit none
      include 'mpif.h'
      integer maxr, c
      parameter (maxr = 64, c = 5)
      integer ierr, rank, np, i, j, k, at, req, vtype, nbad, total
      integer sbuf(c), sbig(2*c), rbuf(c*maxr+2)
      integer counts(maxr), displs(maxr)
      integer status(MPI_STATUS_SIZE)
      integer val
      val(i, j) = i * 1000 + j

      call MPI_INIT(ierr)
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, np, ierr)
      if (np .gt. maxr) call MPI_ABORT(MPI_COMM_WORLD, 3, ierr)
      nbad = 0

!     out of place, with guards at both ends
      do j = 1, c
        sbuf(j) = val(rank, j)
      end do
      do k = 1, c*np + 2
        rbuf(k) = -1
      end do
      call MPI_ALLGATHER(sbuf, c, MPI_INTEGER, rbuf(2), c,
     &                   MPI_INTEGER, MPI_COMM_WORLD, ierr)
      if (ierr .ne. MPI_SUCCESS) nbad = nbad + 1
      if (rbuf(1) .ne. -1 .or. rbuf(c*np+2) .ne. -1) nbad = nbad + 1
      do i = 0, np - 1
        do j = 1, c
          if (rbuf(1 + i*c + j) .ne. val(i, j)) nbad = nbad + 1
        end do
      end do

!     in place
      do k = 1, c*np
        rbuf(k) = -1
      end do
      do j = 1, c
        rbuf(rank*c + j) = val(rank, j)
      end do
      call MPI_ALLGATHER(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, c,
     &                   MPI_INTEGER, MPI_COMM_WORLD, ierr)
      do i = 0, np - 1
        do j = 1, c
          if (rbuf(i*c + j) .ne. val(i, j)) nbad = nbad + 1
        end do
      end do

!     allgatherv: rank i sends mod(i,3) values, blocks in reverse order
      at = 0
      do i = np - 1, 0, -1
        counts(i+1) = mod(i, 3)
        displs(i+1) = at
        at = at + counts(i+1)
      end do
      total = at
      do k = 1, total + 1
        rbuf(k) = -1
      end do
      call MPI_ALLGATHERV(sbuf, counts(rank+1), MPI_INTEGER, rbuf,
     &     counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
      do i = 0, np - 1
        do j = 1, counts(i+1)
          if (rbuf(displs(i+1) + j) .ne. val(i, j)) nbad = nbad + 1
        end do
      end do
      if (rbuf(total + 1) .ne. -1) nbad = nbad + 1

!     nonblocking, then a strided send type
      do k = 1, c*np
        rbuf(k) = -1
      end do
      call MPI_IALLGATHER(sbuf, c, MPI_INTEGER, rbuf, c, MPI_INTEGER,
     &                    MPI_COMM_WORLD, req, ierr)
      call MPI_WAIT(req, status, ierr)
      do i = 0, np - 1
        do j = 1, c
          if (rbuf(i*c + j) .ne. val(i, j)) nbad = nbad + 1
        end do
      end do
      do j = 1, c
        sbig(2*j - 1) = val(rank, j)
        sbig(2*j) = -2
      end do
      call MPI_TYPE_VECTOR(c, 1, 2, MPI_INTEGER, vtype, ierr)
      call MPI_TYPE_COMMIT(vtype, ierr)
      call MPI_ALLGATHER(sbig, 1, vtype, rbuf, c, MPI_INTEGER,
     &                   MPI_COMM_WORLD, ierr)
      do i = 0, np - 1
        do j = 1, c
          if (rbuf(i*c + j) .ne. val(i, j)) nbad = nbad + 1
        end do
      end do
      call MPI_TYPE_FREE(vtype, ierr)

!     an error comes back as a code
      call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN,
     &                             ierr)
      call MPI_ALLGATHER(sbuf, -1, MPI_INTEGER, rbuf, c, MPI_INTEGER,
     &                   MPI_COMM_WORLD, ierr)
      call MPI_ERROR_CLASS(ierr, k, i)
      if (k .ne. MPI_ERR_COUNT) nbad = nbad + 1

      if (nbad .ne. 0) then
        print *, 'rank', rank, ': FAILED checks:', nbad
        call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
      end if
      if (rank .eq. 0) print '(a,i3,a)', 'allgather_f77:', np,
     &   ' ranks: OK'
      call MPI_FINALIZE(ierr)
      end
